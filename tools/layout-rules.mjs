import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The repository's layout as rules: the top folders, gateway/'s rooms with the rooms each may import, and
 * the layers inside a subgraph (resolvers -> service -> store, one service handle named `service`). One
 * judgement (`importViolation`) serves the linter (`layout/imports`, eslint.config.js), which stops a wrong
 * import as it is written, and test/repository/architecture.test.ts, which reads every import of the tree.
 * Plain JavaScript: the linter loads it before anything is compiled. tools/layout.ts draws the docs from it.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** @type {ReadonlyArray<readonly [string, string]>} */
export const TOP_FOLDERS = [
  ['gateway/', 'the server: the rooms below, each part a fastify plugin, listed by server.ts (gateway) and subgraph-host/server.ts (a subgraph on its own)'],
  ['platform/', 'shared plumbing: config, error catalogue, database (PGlite | PostgreSQL), migrations, outbox, principals, defineSubgraph'],
  ['subgraphs/', 'one folder per subgraph (resolvers -> service -> store); registry.ts lists them'],
  ['schema/', 'one SDL per subgraph + supergraph.graphql (composed, checked in) + compose.ts'],
  ['web/', 'the operations dashboard (Vite, TypeScript, no framework), built to web/dist and served at /'],
  ['bench/', 'the benchmarks (npm run bench -- <name>), their helpers (bench/support) and recorded results; peers in bench/peers'],
  ['tools/', 'code and documentation generation (npm run codegen, npm run docs), the layout rules the linter holds, event-stream administration'],
  ['docs/', 'one document per subgraph, operations, architecture, performance, subscriptions, dashboard, testing'],
  [
    'test/',
    'vitest suites against real servers on loopback, foldered by room: gateway/<room>, platform, subgraphs/<name>, repository; test/support: servers, waits, processes',
  ],
];

/** gateway/'s rooms, lowest first: what each holds, and the other rooms its files may import (type-only imports included). */
export const GATEWAY_ROOMS = {
  observability: { about: 'tracing, the metrics registry, probes', imports: [] },
  http: {
    about: 'the one HTTP app (limits, timeouts, problem details), the turn of the event loop, route table, warm-up, ports, process exits',
    imports: ['observability'],
  },
  dashboard: { about: 'the operations dashboard served at / (web/dist), and its build', imports: ['http'] },
  planner: {
    about: "the fork of @apollo/gateway's plan executor and its one seam to the library, answer shaping, incremental delivery (@defer)",
    imports: ['observability'],
  },
  pipeline: {
    about:
      'the operation pipeline every door runs and its policies, the gateway context, error shaping, the direct execution of REST and GraphQL-over-POST operations',
    imports: ['planner'],
  },
  sources: {
    about:
      'the subgraphs served (in process, on servers of their own), their data sources, fetch collapsing and cache, the state cache kept exact by the event log, the federated gateway',
    imports: ['observability', 'http', 'planner', 'pipeline'],
  },
  security: { about: 'credentials, edge guard, authorization, request and rate limits, CORS, audit trail', imports: ['http', 'pipeline'] },
  governance: {
    about: 'field usage and operation metrics per client and operation, the usage route, schema checks',
    imports: ['http', 'pipeline', 'security', 'sources'],
  },
  rest: { about: 'REST paths as GraphQL operations, the OpenAPI document and its page', imports: ['http', 'pipeline', 'security'] },
  subscriptions: {
    about: 'federated subscriptions (shared upstream streams, resumable cursors), graphql-ws, SSE and multipart streams over HTTP over one admission',
    imports: ['observability', 'http', 'pipeline', 'security', 'sources'],
  },
  graphql: {
    about:
      'the supergraph served and reloaded, Apollo Server over the federated gateway, /graphql over HTTP, persisted queries and trusted documents, cache policies',
    imports: ['observability', 'http', 'planner', 'pipeline', 'sources', 'security', 'subscriptions', 'rest'],
  },
  agents: {
    about: 'the MCP endpoint: registered documents as tools for agents, each call one operation through the pipeline',
    imports: ['observability', 'http', 'pipeline', 'graphql'],
  },
  'subgraph-host': {
    about: 'one subgraph as its own server: signed callers, its GraphQL route and socket, its probes',
    imports: ['observability', 'http', 'pipeline', 'security', 'sources', 'subscriptions'],
  },
};

/** The files at gateway/'s top: the processes' entry points and the root of the gateway's parts. */
export const GATEWAY_ENTRY_POINTS = {
  'gateway/main.ts': '`npm start`',
  'gateway/subgraph-main.ts': '`npm run subgraph -- <name>`',
  'gateway/server.ts': "startServer: the gateway's parts, listed in order",
  'gateway/config.ts': "the gateway's configuration section, and every section merged (loadConfig)",
};

/**
 * Why `file` may not import `target` (both relative to the repository root, `.ts` for TypeScript
 * sources), or null when it may: platform/ depends on nothing of the project; a subgraph on platform/ and
 * its own folder, its resolvers never on its store; the gateway reaches the subgraphs through
 * subgraphs/registry.ts (and their settings through subgraphs/config.ts); inside gateway/, a room imports
 * its own files and the rooms it lists; nothing of the service imports tools/.
 */
export function importViolation(file, target) {
  const [layer, second] = file.split('/');
  const [targetLayer, targetSecond] = target.split('/');
  if (targetLayer === 'tools' && layer !== 'tools') return 'nothing of the service imports tools/ (build tools above the layers)';
  if (layer === 'gateway' && targetLayer === 'gateway') return roomViolation(file, target);
  if (targetLayer === layer && layer !== 'subgraphs') return null;
  switch (layer) {
    case 'platform':
      return 'platform/ imports nothing of the project outside platform/';
    case 'schema':
      return targetLayer === 'platform' ? null : 'schema/ imports platform/ only';
    case 'gateway':
      if (targetLayer === 'platform' || targetLayer === 'schema') return null;
      return target === 'subgraphs/registry.ts' || target === 'subgraphs/config.ts'
        ? null
        : 'the gateway reaches subgraphs through subgraphs/registry.ts (and their settings through subgraphs/config.ts) only';
    case 'subgraphs':
      return subgraphViolation(file, target, second, targetLayer, targetSecond);
    default:
      // Code generation and the benchmarks read the schema, the subgraphs' route tables and the servers.
      return null;
  }
}

function subgraphViolation(file, target, second, targetLayer, targetSecond) {
  if (targetLayer === 'platform') return null;
  if (file === 'subgraphs/registry.ts')
    return targetLayer === 'subgraphs' && target.endsWith('/index.ts') ? null : 'the registry imports each subgraph by its index.ts';
  if (file === 'subgraphs/config.ts')
    return targetLayer === 'subgraphs' && target.endsWith('/config.ts') ? null : "subgraphs/config.ts imports each subgraph's config.ts only";
  if (targetLayer !== 'subgraphs' || targetSecond !== second) return `subgraphs/${second} shares code with other subgraphs only through platform/`;
  if (file === `subgraphs/${second}/resolvers.ts` && target === `subgraphs/${second}/store.ts`) {
    return `resolvers reach the store only through the service (subgraphs/${second}/service.ts, ctx.service)`;
  }
  return null;
}

/** Whether a gateway file may import another: its own room, a room its room may import, never an entry point. */
function roomViolation(file, target) {
  const roomOf = (path) => (path.split('/').length > 2 ? path.split('/')[1] : null);
  const [from, to] = [roomOf(file), roomOf(target)];
  if (from === null) return null; // an entry point composes every room
  if (to === null) return `gateway/${from}/ imports an entry point (${target}); entry points compose rooms, rooms do not import them`;
  if (from === to) return null;
  const room = GATEWAY_ROOMS[from];
  if (!room) return `gateway/${from}/ is no room of tools/layout-rules.mjs`;
  return room.imports.includes(to) ? null : `gateway/${from}/ may import ${room.imports.join(', ') || 'no other room'}, not gateway/${to}/`;
}

/** A relative import specifier of `file`, as the repository-relative path `importViolation` judges. */
export function importTarget(file, specifier) {
  return relative(ROOT, join(ROOT, dirname(file), specifier))
    .split('\\')
    .join('/')
    .replace(/\.(m?)js$/, (_, m) => (m ? '.mjs' : '.ts'));
}

/** `layout/imports`: every relative import judged by `importViolation`, as it is written. */
const importsRule = {
  meta: { type: 'problem', docs: { description: 'imports follow the layout of tools/layout-rules.mjs' }, schema: [] },
  create(context) {
    const file = relative(ROOT, context.filename).split('\\').join('/');
    const judge = (node) => {
      const specifier = node.source?.value;
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const why = importViolation(file, importTarget(file, specifier));
      if (why) context.report({ node: node.source, message: `${specifier}: ${why}` });
    };
    return { ImportDeclaration: judge, ExportNamedDeclaration: judge, ExportAllDeclaration: judge, ImportExpression: judge };
  },
};

/**
 * `layout/service-handle`: a subgraph with a service names its handle on the request context `service`, in
 * every subgraph: its context.ts declares the member, and its resolvers read no other handle.
 */
const serviceHandleRule = {
  meta: { type: 'problem', docs: { description: "a subgraph's service handle is ctx.service" }, schema: [] },
  create(context) {
    const file = relative(ROOT, context.filename).split('\\').join('/');
    const match = /^subgraphs\/([^/]+)\/context\.ts$/.exec(file);
    if (!match || !existsSync(join(ROOT, 'subgraphs', match[1], 'service.ts'))) return {};
    let declared = false;
    return {
      'TSPropertySignature > Identifier.key'(node) {
        if (node.name === 'service') declared = true;
      },
      'Program:exit'(node) {
        if (!declared)
          context.report({
            node,
            message: `subgraphs/${match[1]} has a service: its request context names it \`service\` (ctx.service), as every subgraph does`,
          });
      },
    };
  },
};

/** The linter's plugin: `layout/imports` and `layout/service-handle`. */
export const layoutPlugin = { meta: { name: 'layout' }, rules: { imports: importsRule, 'service-handle': serviceHandleRule } };
