import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { PIPELINE_STEPS } from '../../../gateway/pipeline/pipeline.js';
import type { AuditEntry } from '../../../gateway/security/audit.js';
import { MAX_COLLECTED } from '../../../gateway/security/operation-fields.js';
import { SCOPES } from '../../../platform/principal.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { safelistEnv } from '../../support/credentials.js';
import { hoursFromNow } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * One pipeline behind every door, observed door by door. The doors are read from the running server: every
 * route it registered (a route this suite cannot classify fails it), its WebSocket upgrade handlers, and the
 * streams /graphql negotiates (SSE, multipart). Each door is then tried as a hostile partner would, with a
 * keys file and a trusted-documents safelist, and each check of the pipeline is watched act on it:
 *
 *   documents      free text refused (PERSISTED_QUERY_NOT_IN_LIST) for a key without schema:free-text
 *   limits         a registered document over GRAPHQL_MAX_DEPTH refused (DEPTH_LIMIT_EXCEEDED)
 *   authorization  a field the key holds no scope for refused (FORBIDDEN)
 *   rate           a principal's bucket spent by that door alone, then RATE_LIMITED
 *   audit, usage   an accepted operation's audit line (mutations) and its usage count, by principal
 *
 * /graphql is tried under several spellings the router takes for it (percent-encoded): each gets the same
 * refusals. A REST route's text is always registered (REST's own client): its document step is watched
 * through the trusted-document counter instead.
 */

const OPERATOR = 'doors-operator-key-000001';
/** Every scope a partner may hold, but not free text (so the safelist applies) and not ops:admin. */
const PARTNER_SCOPES = SCOPES.filter((s) => s !== 'ops:admin' && s !== 'schema:free-text');

/** `batch`: the operation as an entry of a batch; `mcp`: as a tool call on /mcp (its registered document's tool, `execute` for text). */
const GRAPHQL_DOORS = ['post', 'get', 'sse', 'multipart', 'graphql-ws', 'batch', 'mcp'] as const;
/** The doors whose refusals travel inside a 200 (a socket's messages, a batch's entries, a tool's result). */
const IN_BAND = new Set<string>(['graphql-ws', 'batch', 'mcp']);
const REST_DOORS = ['rest-get', 'rest-post'] as const;
type DoorName = (typeof GRAPHQL_DOORS)[number] | (typeof REST_DOORS)[number];
const SPELLINGS = ['/%67raphql', '/graph%71l', '/%67%72%61%70%68%71%6C'] as const;
/** One principal per door, use and spelling: each check spends its own bucket (RATE_LIMIT_BURST is small here). */
type Use = 'ok' | 'rate' | 'free' | 'narrow';
const USES: readonly Use[] = ['ok', 'rate', 'free', 'narrow'];
const keyOf = (door: DoorName, use: Use, spelling = 0) => `doors-${use}-${door}-${spelling}-key-00000`;

const FLEET = 'query DoorFleet { fleetSummary { total } }';
const QUOTE = 'mutation DoorQuote($input: CreateQuoteInput!) { createQuote(input: $input) { id } }';
const CHANGES = 'subscription DoorChanges { fleetSummaryChanged { cursor } }';
/** Registered, but five levels deep: over this suite's GRAPHQL_MAX_DEPTH of 4. */
const DEEP = 'query DoorDeep { bookings(first: 1) { edges { node { location { id } } } } }';
const DEEP_CHANGES = 'subscription DoorDeepChanges { trackingUpdated(bookingId: "BK-none") { booking { machines { depot { id } } } } }';
/** Registered; prediction:read (and, the subscription, optimization:read), which NARROW does not hold. */
const MODELS = 'query DoorModels { predictionModels { ready } }';
const MODELS_CHANGES = 'subscription DoorModelChanges { quantumRunCompleted { cursor } }';
/** Registered; optimization:run, which NARROW does not hold. */
const RUN = 'mutation DoorRun { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4 }) { id } }';
/** Registered; its cost grows with `$n` (a page of `$n` bookings). */
const PAGE = 'query DoorPage($n: Int) { bookings(first: $n) { totalCount } }';
const FREE = '{ fleetSummary { available } }';
const FREE_CHANGES = 'subscription { fleetSummaryChanged { cursor available } }';

const quoteInput = () => ({ machineIds: ['EQ-001'], locationId: 'LOC-999', startTime: hoursFromNow(30), durationHours: 4 });

/** The routes other than REST's that run operations: GraphQL over HTTP (and its batches), and the MCP endpoint's tool calls. */
const OPERATION_DOORS = new Set(['/graphql', '/mcp']);

/** The routes that run no operation, and what each is (the classification this suite holds the server to). */
const NO_OPERATION: ReadonlyArray<readonly [RegExp, string]> = [
  [/^\/health(\/(live|ready))?$/, 'probes'],
  [/^\/metrics$/, 'Prometheus metrics (metrics:read)'],
  [/^\/openapi\.json$/, 'the REST contract'],
  [/^\/docs(\/rapidoc-min\.js)?$/, 'the REST contract rendered, and its renderer'],
  [/^\/$/, 'the dashboard'],
  [/^\/graphiql$/, 'the GraphQL explorer page (GRAPHQL_EXPLORER)'],
  [/^\/graphql\/documents$/, "the caller's trusted documents, listed (runs nothing)"],
  [/^\/(assets\/[\w.-]+|favicon\.svg)$/, "the dashboard's files"],
  [/^\/admin\/(usage|supergraph)$/, 'field usage and the served supergraph (ops:admin)'],
  [/^\/admin\/state-cache\/invalidate$/, "the state cache's invalidation by operators (ops:admin)"],
  [/^\/\.well-known\/jwks\.json$/, 'the quote-signing keys'],
];

interface Outcome {
  status: number;
  /** The first error's code, or null for an answer without errors. */
  code: string | null;
}

const codeOf = (body: { errors?: { extensions?: { code?: string } }[]; code?: string } | null): string | null =>
  body?.errors?.[0]?.extensions?.code ?? body?.code ?? null;

describe('one pipeline behind every door (keys file, TRUSTED_DOCUMENTS=safelist)', () => {
  let server: TestServer;
  let url: string;
  const audits: AuditEntry[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'door-matrix-'));

  beforeAll(async () => {
    const doors: DoorName[] = [...GRAPHQL_DOORS, ...REST_DOORS];
    const registered = [FLEET, QUOTE, CHANGES, DEEP, DEEP_CHANGES, MODELS, MODELS_CHANGES, RUN, PAGE];
    const credentials = safelistEnv(
      dir,
      doors.flatMap((door) =>
        USES.flatMap((use) =>
          [0, 1, 2, 3].map((spelling) => ({
            key: keyOf(door, use, spelling),
            principal: `${use}-${door}${spelling ? `-${spelling}` : ''}`,
            tenant: 'doors',
            // A narrow key holds what fleet and rental need, and nothing of prediction or optimization.
            scopes: use === 'narrow' ? ['fleet:read', 'rental:read', 'rental:book'] : PARTNER_SCOPES,
          })),
        ),
      ),
      [{ client: 'doors-app', principals: ['doors/*'], documents: Object.fromEntries(registered.map((text, i) => [`door-doc-${i}`, text])) }],
    );
    server = await startTestServer({
      env: {
        ...credentials,
        API_KEYS: OPERATOR,
        GRAPHQL_MAX_DEPTH: '4',
        RATE_LIMIT_BURST: '6',
        RATE_LIMIT_PER_S: '1',
        USAGE_FLUSH_S: '3600',
      },
      audit: (entry) => audits.push(entry),
    });
    ({ url } = server);
  });
  // One MCP session per key, ended after the suite.
  const mcpClients = new Map<string, { client: Client; transport: StreamableHTTPClientTransport }>();
  afterAll(async () => {
    for (const { client, transport } of mcpClients.values())
      await transport.terminateSession().then(
        () => client.close(),
        () => client.close(),
      );
    rmSync(dir, { recursive: true, force: true });
  });

  /** A tool call on /mcp: the tool of the registered document `text` names (`execute` for text no document holds). */
  async function callTool(text: string, key: string, variables: Record<string, unknown>): Promise<Outcome> {
    let session = mcpClients.get(key);
    try {
      if (!session) {
        const client = new Client({ name: 'door-matrix', version: '1.0.0' });
        const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { 'x-api-key': key } } });
        await client.connect(transport);
        mcpClients.set(key, (session = { client, transport }));
      }
      const name = /^(?:query|mutation|subscription) (\w+)/.exec(text)?.[1] ?? 'execute';
      const args = name === 'execute' ? { query: text, variables } : variables;
      const result = JSON.parse(JSON.stringify(await session.client.callTool({ name, arguments: args }))) as { structuredContent?: unknown };
      return { status: 0, code: codeOf(result.structuredContent as never) };
    } catch (error) {
      if (error instanceof McpError) return { status: 0, code: /Unknown tool/.test(error.message) ? 'UNKNOWN_TOOL' : `MCP_${error.code}` };
      // The HTTP request carrying the call refused at the edge (its rate token).
      if (/RATE_LIMITED|429/.test(String(error))) return { status: 0, code: 'RATE_LIMITED' };
      throw error;
    }
  }

  /** Sends `text` by a GraphQL door (`path` a spelling of /graphql): its status and first error code. */
  async function send(
    door: (typeof GRAPHQL_DOORS)[number],
    text: string,
    key: string,
    variables: Record<string, unknown> = {},
    path = '/graphql',
  ): Promise<Outcome> {
    const headers = { 'x-api-key': key };
    if (door === 'mcp') return callTool(text, key, variables);
    if (door === 'batch') {
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        body: JSON.stringify([{ query: text, variables }]),
      });
      const body: unknown = await res.json();
      // A batch refused whole (at the edge) answers problem details; otherwise its one entry's answer.
      return { status: res.status, code: codeOf((Array.isArray(body) ? body[0] : body) as never) };
    }
    if (door === 'graphql-ws') {
      const ws = wsClient(url, headers);
      try {
        const collector = new Collector(ws.client, text, variables);
        await until(() => collector.results.length > 0 || collector.error !== undefined, `an answer on graphql-ws to ${text}`);
        collector.unsubscribe();
        const errors = Array.isArray(collector.error) ? (collector.error as { extensions?: { code?: string } }[]) : collector.results[0]?.errors;
        return { status: 0, code: codeOf({ errors: errors as { extensions?: { code?: string } }[] }) };
      } finally {
        await ws.dispose();
      }
    }
    if (door === 'get') {
      const search = new URLSearchParams({ query: text, variables: JSON.stringify(variables) });
      const res = await fetch(`${url}${path}?${search.toString()}`, { headers: { ...headers, 'apollo-require-preflight': 'true' } });
      return { status: res.status, code: codeOf((await res.json()) as never) };
    }
    const accept =
      door === 'sse'
        ? 'text/event-stream'
        : door === 'multipart'
          ? 'multipart/mixed;subscriptionSpec="1.0", application/json'
          : 'application/graphql-response+json';
    const controller = new AbortController();
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept },
      body: JSON.stringify({ query: text, variables }),
      signal: controller.signal,
    });
    const type = res.headers.get('content-type') ?? '';
    if (type.startsWith('multipart/mixed') && res.status === 200) {
      // A subscription that started: accepted (its events come when the fleet changes).
      controller.abort();
      return { status: res.status, code: null };
    }
    if (type.startsWith('text/event-stream')) {
      // A stream that started: its first result is what the operation answered.
      const reader = res.body!.getReader();
      let seen = '';
      while (!/"(data|errors|payload)"/.test(seen)) {
        const chunk = await reader.read();
        if (chunk.done) break;
        seen += new TextDecoder().decode(chunk.value);
      }
      controller.abort();
      const json = /(\{"(?:data|errors|payload)".*\})/.exec(seen)?.[1];
      const parsed = json ? (JSON.parse(json) as { payload?: unknown }) : null;
      return { status: res.status, code: codeOf(parsed?.payload ?? parsed) };
    }
    return { status: res.status, code: codeOf((await res.json()) as never) };
  }

  /** The text each GraphQL door runs: multipart serves subscriptions only. */
  const asDoor = (door: (typeof GRAPHQL_DOORS)[number], query: string, subscription: string) => (door === 'multipart' ? subscription : query);

  it('every door of the running server is classified: /graphql, the REST routes, the routes that run no operation, one WebSocket handler', () => {
    const rest = new Set(subgraphs.flatMap((m) => m.routes.map((r) => `${m.restPrefix}${r.path.replace(/\{(\w+)\}/g, ':$1')}`)));
    const unclassified = server
      .routes()
      .filter((route) => !OPERATION_DOORS.has(route.url) && !rest.has(route.url) && !NO_OPERATION.some(([pattern]) => pattern.test(route.url)))
      .map((route) => `${route.methods.join(',')} ${route.url}`);
    expect(unclassified).toEqual([]);
    const graphql = server.routes().find((r) => r.url === '/graphql');
    expect(graphql?.methods).toEqual(['GET', 'POST', 'OPTIONS'].filter((m) => graphql?.methods.includes(m)));
    expect(graphql?.methods).toContain('POST');
    expect(graphql?.methods).toContain('GET');
    // Every REST route of the tables is registered (each one runs the engine's handler, and so the pipeline).
    for (const path of rest)
      expect(
        server.routes().some((r) => r.url === path),
        path,
      ).toBe(true);
    // The only upgrade handler is graphql-ws at /graphql.
    expect(server.app.server.listenerCount('upgrade')).toBe(1);
    // Every step is applied by the gateway.
    expect(server.pipeline.steps.map((s) => s.name)).toEqual([...PIPELINE_STEPS]);
    expect(server.pipeline.steps.filter((s) => !s.applied)).toEqual([]);
  });

  for (const door of GRAPHQL_DOORS) {
    it(`${door}: free text refused by the safelist, a registered document over a limit refused, a field without scope refused`, async () => {
      const free = await send(door, asDoor(door, FREE, FREE_CHANGES), keyOf(door, 'free'));
      // MCP offers text (`execute`) only to a key holding schema:free-text: for this one there is no such tool.
      expect(free.code, 'free text').toBe(door === 'mcp' ? 'UNKNOWN_TOOL' : 'PERSISTED_QUERY_NOT_IN_LIST');
      const deep = await send(door, asDoor(door, DEEP, DEEP_CHANGES), keyOf(door, 'free'));
      expect(deep.code, 'over the depth limit').toBe('DEPTH_LIMIT_EXCEEDED');
      const unscoped = await send(door, asDoor(door, MODELS, MODELS_CHANGES), keyOf(door, 'narrow'));
      expect(unscoped.code, 'without scope').toBe('FORBIDDEN');
      if (door === 'batch') expect([free.status, deep.status, unscoped.status]).toEqual([200, 200, 200]);
      else if (!IN_BAND.has(door)) expect([free.status, deep.status, unscoped.status]).toEqual([403, 400, 403]);
    });
  }

  for (const [index, spelling] of SPELLINGS.entries()) {
    it(`${spelling} is /graphql to the router, and to every check`, async () => {
      for (const door of ['post', 'get', 'sse', 'batch'] as const) {
        const free = keyOf(door, 'free', index + 1);
        expect((await send(door, FREE, free, {}, spelling)).code, `${door} free text`).toBe('PERSISTED_QUERY_NOT_IN_LIST');
        expect((await send(door, DEEP, free, {}, spelling)).code, `${door} over a limit`).toBe('DEPTH_LIMIT_EXCEEDED');
        expect((await send(door, MODELS, keyOf(door, 'narrow', index + 1), {}, spelling)).code, `${door} without scope`).toBe('FORBIDDEN');
      }
      // A browser's Accept is refused on every spelling, as on /graphql.
      const page = await fetch(`${url}${spelling}`, { headers: { accept: 'text/html', 'x-api-key': OPERATOR } });
      expect(page.status).toBe(406);
      // A WebSocket upgrade is served at /graphql exactly; any other spelling is refused before graphql-ws.
      const refused = await new Promise<string>((resolve) => {
        const socket = new WebSocket(`${url.replace(/^http/, 'ws')}${spelling}`, 'graphql-transport-ws');
        socket.on('open', () => (socket.close(), resolve('open')));
        socket.on('error', () => resolve('refused'));
      });
      expect(refused).toBe('refused');
    });
  }

  it('every door charges each operation: a principal that uses one door alone runs out, and is refused there', async () => {
    for (const door of GRAPHQL_DOORS) {
      let outcome: Outcome = { status: 0, code: null };
      // Six tokens, one back a second: each operation takes at least one.
      for (let i = 0; i < 40 && outcome.code !== 'RATE_LIMITED'; i++) outcome = await send(door, asDoor(door, FLEET, CHANGES), keyOf(door, 'rate'));
      expect(outcome.code, door).toBe('RATE_LIMITED');
      if (!IN_BAND.has(door)) expect(outcome.status, door).toBe(429);
    }
    // A socket pays per operation too: one connection looping a query is refused once the bucket is spent.
    const ws = wsClient(url, { 'x-api-key': keyOf('graphql-ws', 'rate', 1) });
    let looped: unknown;
    for (let i = 0; i < 40 && !looped; i++) {
      const collector = new Collector(ws.client, FLEET);
      await until(() => collector.completed || collector.error !== undefined, 'a query on the socket');
      looped = collector.error ?? collector.results[0]?.errors;
    }
    await ws.dispose();
    expect(JSON.stringify(looped)).toContain('RATE_LIMITED');
    // A refused operation on a socket costs its token too: a loop of free text the safelist refuses runs out.
    const refusing = wsClient(url, { 'x-api-key': keyOf('graphql-ws', 'rate', 2) });
    let codes: string[] = [];
    for (let i = 0; i < 40 && !codes.includes('RATE_LIMITED'); i++) {
      const collector = new Collector(refusing.client, FREE);
      await until(() => collector.completed || collector.error !== undefined, 'a refusal on the socket');
      codes = ((collector.error ?? []) as { extensions?: { code?: string } }[]).map((e) => e.extensions?.code ?? '');
      if (!codes.includes('RATE_LIMITED')) expect(codes).toEqual(['PERSISTED_QUERY_NOT_IN_LIST']);
    }
    await refusing.dispose();
    expect(codes).toEqual(['RATE_LIMITED']);
    for (const [door, path, method] of [
      ['rest-get', '/rental/fleet/summary', 'GET'],
      ['rest-post', '/rental/booking/BK-none/complete', 'POST'],
    ] as const) {
      let status = 0;
      for (let i = 0; i < 30 && status !== 429; i++) status = (await fetch(`${url}${path}`, { method, headers: { 'x-api-key': keyOf(door, 'rate') } })).status;
      expect(status, door).toBe(429);
    }
  });

  it('a GET whose parameters two URL parsers read differently runs what its door judged', async () => {
    // fastify leaves a value with a malformed escape as sent; a parser that decodes it would read a second
    // `n` (a million bookings) that the limits never saw. Sent raw: a client library would encode the quotes.
    const variables = '{"n":1,"s":"%22,%22n%22:1000000,%22t%22:%22","u":"%E0%A4%A"}';
    const path = `/graphql?query=${encodeURIComponent(PAGE)}&variables=${variables}`;
    const { status, body } = await rawGet(url, path, { 'x-api-key': keyOf('get', 'ok', 3), 'apollo-require-preflight': 'true', accept: 'application/json' });
    const answer = JSON.parse(body) as { data?: { bookings: { totalCount: number } }; errors?: unknown[] };
    expect(status).toBe(200);
    expect(answer.errors).toBeUndefined();
    expect(typeof answer.data?.bookings.totalCount).toBe('number');
  });

  it('REST routes: their registered text is resolved by the document step, a route over a limit is refused, a route without scope is refused', async () => {
    const counted = async () => {
      const text = await (await fetch(`${url}/metrics`, { headers: { 'x-api-key': OPERATOR } })).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('graphql_trusted_document_requests_total{client="rest"'))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    };
    const before = await counted();
    const deep = await fetch(`${url}/rental/bookings`, { headers: { 'x-api-key': keyOf('rest-get', 'free') } });
    expect(deep.status).toBe(400);
    expect(((await deep.json()) as { code: string }).code).toBe('DEPTH_LIMIT_EXCEEDED');
    const summary = await fetch(`${url}/rental/fleet/summary`, { headers: { 'x-api-key': keyOf('rest-get', 'free') } });
    expect(summary.status).toBe(200);
    // Both took their text through the document step (REST's own client, registered at start).
    expect(await counted()).toBe(before + 2);
    const unscoped = await fetch(`${url}/prediction/health`, { headers: { 'x-api-key': keyOf('rest-get', 'narrow') } });
    expect(unscoped.status).toBe(403);
    // Encoded spellings of a REST path are the same route, with the same checks.
    const deepSpelled = await fetch(`${url}/rental/%62ookings`, { headers: { 'x-api-key': keyOf('rest-get', 'free', 1) } });
    expect(((await deepSpelled.json()) as { code: string }).code).toBe('DEPTH_LIMIT_EXCEEDED');
    expect((await fetch(`${url}/prediction/%68ealth`, { headers: { 'x-api-key': keyOf('rest-get', 'narrow', 1) } })).status).toBe(403);
    expect(await counted()).toBe(before + 3);
  });

  it("an accepted operation on each door leaves its audit line (mutations) and its usage count, by the door's principal", async () => {
    for (const door of GRAPHQL_DOORS) {
      const read = await send(door, asDoor(door, FLEET, CHANGES), keyOf(door, 'ok'));
      expect(read.code, door).toBeNull();
      if (door === 'get' || door === 'multipart') continue;
      const write = await send(door, QUOTE, keyOf(door, 'ok'), { input: quoteInput() });
      expect(write.code, `${door} mutation`).not.toBeNull();
    }
    const summary = await fetch(`${url}/rental/fleet/summary`, { headers: { 'x-api-key': keyOf('rest-get', 'ok') } });
    expect(summary.status).toBe(200);
    const quote = await fetch(`${url}/rental/pricing/quote`, {
      method: 'POST',
      headers: { 'x-api-key': keyOf('rest-post', 'ok'), 'content-type': 'application/json' },
      body: JSON.stringify({ machine_ids: ['EQ-001'], location_id: 'LOC-999', start_time: hoursFromNow(30), duration_hours: 4 }),
    });
    expect(quote.status).toBeGreaterThanOrEqual(400);
    // The audit trail: one line per attempted mutation, each door's principal, the refusal's code.
    for (const door of ['post', 'sse', 'graphql-ws', 'batch', 'mcp', 'rest-post'] as const) {
      const line = audits.find((a) => a.principal === `ok-${door}`);
      expect(line, door).toMatchObject({ tenant: 'doors', operation: 'createQuote' });
      expect(line?.outcome, door).not.toBe('ok');
    }
    // A mutation refused by authorization is an attempted change on every door: its line says FORBIDDEN.
    for (const door of ['post', 'sse', 'graphql-ws', 'batch', 'mcp'] as const) {
      expect((await send(door, RUN, keyOf(door, 'narrow', 3))).code, door).toBe('FORBIDDEN');
      const line = audits.find((a) => a.principal === `narrow-${door}-3`);
      expect(line, door).toMatchObject({ operation: 'startQuantumRun', outcome: 'FORBIDDEN' });
    }
    // Field usage, counted per principal whatever the door.
    const usage = async (coordinate: string) => {
      const res = await fetch(`${url}/admin/usage?coordinate=${coordinate}`, { headers: { 'x-api-key': OPERATOR } });
      return ((await res.json()) as { clients: { principal: string; requests: number }[] }).clients;
    };
    const reads = await usage('Query.fleetSummary');
    for (const door of ['post', 'get', 'sse', 'graphql-ws', 'batch', 'mcp', 'rest-get'] as const) {
      expect(reads.find((row) => row.principal === `ok-${door}`)?.requests, door).toBeGreaterThanOrEqual(1);
    }
    const changes = await usage('Subscription.fleetSummaryChanged');
    expect(changes.find((row) => row.principal === 'ok-multipart')?.requests).toBeGreaterThanOrEqual(1);
    const writes = await usage('Mutation.createQuote');
    for (const door of ['post', 'sse', 'graphql-ws', 'batch', 'mcp', 'rest-post'] as const) {
      expect(writes.find((row) => row.principal === `ok-${door}`)?.requests, door).toBeGreaterThanOrEqual(1);
    }
  });
});

describe('a document too large to judge is refused whole', () => {
  let server: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'door-collect-'));
  const PARTNER = 'collect-partner-key-00001';
  beforeAll(async () => {
    const keys = join(dir, 'keys.json');
    writeFileSync(keys, JSON.stringify([{ key: PARTNER, principal: 'collect-partner', tenant: 'collect', scopes: ['fleet:read', 'schema:free-text'] }]));
    // Every request limit raised out of the way: the collection's own bound is what is left.
    server = await startTestServer({
      env: {
        API_KEYS_FILE: keys,
        API_KEYS: 'collect-operator-key-0001',
        GRAPHQL_MAX_FIELDS: '1000000',
        GRAPHQL_MAX_ROOT_FIELDS: '100000',
        GRAPHQL_MAX_TOKENS: '100000',
      },
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** 2^16 `__typename` selections at the root from a few hundred bytes, then a mutation the key may not run. */
  const fragments = Array.from({ length: 16 }, (_, i) => `fragment M${i} on Mutation { ...M${i + 1} ...M${i + 1} }`).join(' ');
  const HIDDEN = `mutation Hidden { ...M0 startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4 }) { id } } ${fragments} fragment M16 on Mutation { __typename }`;

  it('over POST and on a socket: 400 FIELD_LIMIT_EXCEEDED naming the bound, and nothing runs', async () => {
    expect(HIDDEN.length).toBeLessThan(1200);
    const runs = async () => {
      const res = await fetch(`${server.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'collect-operator-key-0001' },
        body: JSON.stringify({ query: '{ quantumRuns(first: 50) { totalCount } }' }),
      });
      return ((await res.json()) as { data: { quantumRuns: { totalCount: number } } }).data.quantumRuns.totalCount;
    };
    const before = await runs();
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': PARTNER },
      body: JSON.stringify({ query: HIDDEN }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { message: string; extensions: { code: string; limit?: { max: number } } }[] };
    expect(body.errors[0]?.extensions.code).toBe('FIELD_LIMIT_EXCEEDED');
    expect(body.errors[0]?.message).toContain(MAX_COLLECTED.toLocaleString('en-US'));
    const ws = wsClient(server.url, { 'x-api-key': PARTNER });
    const collector = new Collector(ws.client, HIDDEN);
    await until(() => collector.error !== undefined || collector.results.length > 0, 'the socket to answer');
    await ws.dispose();
    expect(JSON.stringify(collector.error ?? collector.results)).toContain('FIELD_LIMIT_EXCEEDED');
    expect(await runs()).toBe(before);
  });
});

/** A GET sent with its path exactly as given (fetch would percent-encode what this suite sends raw). */
function rawGet(url: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
