import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../../platform/clock.js';
import { ConfigError, type PlatformConfig } from '../../platform/config.js';
import { ANONYMOUS_PRINCIPAL, PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphRuntime } from '../../platform/runtime.js';
import { readSubgraphSdl, type SubgraphModule } from '../../platform/subgraph.js';
import type { SourcesConfig } from '../sources/config.js';
import { graphqlValidation, pipelinePlugin } from '../pipeline/pipeline.js';
import { subgraphsPlugin } from '../sources/subgraphs.js';
import { createHttpApp, readyAndListen } from '../http/app.js';
import type { HttpConfig } from '../http/config.js';
import { assertPortFree } from '../http/port.js';
import { warmUpPlugin } from '../http/warm-up.js';
import { subgraphHealthPlugin } from '../observability/health.js';
import { auditPolicy } from '../security/audit.js';
import { createAuthorizer, wholeAuthorizationPolicy } from '../security/authorization.js';
import { createLimiter, requestLimitsOf, subgraphLimitsOf, type RequestLimitsConfig } from '../security/limits.js';
import type { SubscriptionsConfig } from '../subscriptions/config.js';
import { signedCallerPlugin } from './caller.js';
import { subgraphGraphQLPlugin } from './graphql.js';
import { subgraphSocketPlugin } from './socket.js';

export interface RunningSubgraphServer {
  app: FastifyInstance;
  runtime: SubgraphRuntime;
  /** GraphQL endpoint for SUBGRAPH_URLS, e.g. http://127.0.0.1:4101/graphql */
  graphqlUrl: string;
  close(): Promise<void>;
}

/** What a subgraph server reads: platform's section, the HTTP and WebSocket settings and how subgraphs execute; the subgraph its own slice of the rest. */
export type SubgraphServerConfig = PlatformConfig & HttpConfig & SubscriptionsConfig & SourcesConfig & RequestLimitsConfig & Readonly<Record<string, unknown>>;

/**
 * One subgraph as its own server (distributed mode): GraphQL over HTTP and graphql-transport-ws at
 * /graphql for its gateway, and /health. It migrates and owns its tables as in the one-process mode, and
 * serves only calls its gateway signed with PRINCIPAL_SECRET, which it needs to start. The root lists the
 * same parts as the gateway's (gateway/server.ts), with the pipeline steps that apply to signed calls.
 */
export async function startSubgraphServer(options: { config: SubgraphServerConfig; module: SubgraphModule; clock?: Clock }): Promise<RunningSubgraphServer> {
  const { config, module } = options;
  const signer = requiredSigner(config);
  const app = createHttpApp(config);
  await assertPortFree(config.HOST, config.PORT);
  // The same requirements as the gateway's, read from this subgraph's own SDL and judged by the same code.
  const sdl = readSubgraphSdl(module.name);
  const onInternalError = (error: unknown) => app.log.error({ err: error, subgraph: module.name }, 'subgraph fault');
  const instanceOf = (parent: FastifyInstance) => parent.subgraphs.local.get(module.name)!;
  void app
    .register(warmUpPlugin)
    .register(subgraphsPlugin, (parent) => ({
      config,
      modules: [module],
      remote: 'none' as const,
      clock: options.clock ?? systemClock,
      warmUp: parent.warmUp,
      metrics: null,
    }))
    // The operation pipeline (gateway/pipeline/pipeline.ts) with the steps that apply to its gateway's
    // signed calls, on both of its doors (HTTP and the socket); docs/operations.md says why each other
    // step is the gateway's alone.
    .register(pipelinePlugin, (parent) => ({
      steps: {
        documents: { notApplied: 'a subgraph server runs the fetches its gateway planned and signed; trusted documents are resolved at the gateway' },
        limits: createLimiter(sdl, subgraphLimitsOf(requestLimitsOf(config)), { schema: instanceOf(parent).schema }),
        validation: graphqlValidation(),
        authorization: wholeAuthorizationPolicy(createAuthorizer(sdl, { schema: instanceOf(parent).schema })),
        rate: { notApplied: "charged at the gateway, once per client operation, in the caller's bucket; a planned fetch is part of it" },
        audit: auditPolicy((entry) => parent.log.info({ audit: { ...entry, subgraph: module.name } }, 'audit')),
        usage: { notApplied: 'counted at the gateway, by client and operation' },
      },
    }))
    .register(signedCallerPlugin, { subgraph: module.name, publicPrincipal: ANONYMOUS_PRINCIPAL, signer })
    .register(subgraphGraphQLPlugin, (parent) => ({ instance: instanceOf(parent), sdl, compiled: config.SUBGRAPH_COMPILED_EXECUTION, onInternalError }))
    .register(subgraphHealthPlugin, (parent) => ({ name: module.name, instance: instanceOf(parent), database: parent.subgraphs.runtime!.db.kind }))
    .register(subgraphSocketPlugin, (parent) => ({
      config,
      subgraph: module.name,
      instance: instanceOf(parent),
      signer,
      pipeline: parent.pipeline,
      onInternalError,
    }));
  warnOfUnnamedPeers(app, module, config);
  const url = await readyAndListen(app, config);
  return { app, runtime: app.subgraphs.runtime!, graphqlUrl: `${url}/graphql`, close: () => app.close() };
}

/**
 * A subgraph server serves only what its gateway signed: without the secret it could check nothing, and
 * acting for whatever credential reaches its port is what a hostile caller would want.
 */
function requiredSigner(config: PlatformConfig): PrincipalSigner {
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  if (signer) return signer;
  throw new ConfigError([
    `PRINCIPAL_SECRET: needed by a subgraph server, which serves only calls its gateway signed (set the gateway's PRINCIPAL_SECRET, 32+ characters, in both; e.g. PRINCIPAL_SECRET=$(openssl rand -base64 32))`,
  ]);
}

/** A peer SUBGRAPH_URLS does not name is answered by the subgraph's fallback: said once at start. */
function warnOfUnnamedPeers(app: FastifyInstance, module: SubgraphModule, config: PlatformConfig): void {
  for (const peer of module.peers ?? []) {
    if (!config.SUBGRAPH_URLS[peer]) {
      app.log.warn(`subgraph ${module.name} asks ${peer}, which SUBGRAPH_URLS does not name: it answers with its fallback (see docs/rental.md)`);
    }
  }
}
