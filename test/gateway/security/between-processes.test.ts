import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startServer } from '../../../gateway/server.js';
import { startSubgraphServer } from '../../../gateway/subgraph-host/server.js';
import { loadConfig } from '../../../gateway/config.js';
import { PRINCIPAL_HEADER, PrincipalSigner, subscriptionBody, type Principal } from '../../../platform/principal.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { gql } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

/*
 * Defence in depth between processes: with PRINCIPAL_SECRET, a subgraph server serves only calls its
 * gateway signed for it (the subgraph, the method, path and body, within 30 s), `_service`, `_entities` and
 * introspection included, and judges each by the scopes of its own SDL with the gateway's code. A captured
 * header runs nothing else, nowhere else. /health names no subgraph URL to a caller that is no operator.
 */

const SECRET = randomBytes(24).toString('hex');
const signer = PrincipalSigner.from(SECRET)!;
const OPERATOR = 'between-operator-key-001';
const FLEET = 'between-fleet-key-000002';
const fleetReader: Principal = { id: 'fleet-reader', tenant: 'tenant-f', scopes: ['fleet:read'] };
const runner: Principal = { id: 'runner', tenant: 'tenant-r', scopes: ['optimization:run', 'optimization:read'] };

describe('a subgraph server reached past the gateway', () => {
  const dir = mkdtempSync(join(tmpdir(), 'between-'));
  let server: TestServer;
  let optimization: string;
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(file, JSON.stringify([{ key: FLEET, principal: 'fleet-reader', tenant: 'tenant-f', scopes: ['fleet:read'] }]));
    server = await startTestServer({ mode: 'distributed', env: { API_KEYS_FILE: file, API_KEYS: OPERATOR, PRINCIPAL_SECRET: SECRET } });
    optimization = server.subgraphServers.get('optimization')!.graphqlUrl;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const post = (url: string, body: string, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const call = (url: string, body: string, subgraph = 'optimization') => ({ subgraph, method: 'POST', path: new URL(url).pathname, body });

  it('refuses every unsigned call, whatever key it carries: queries, mutations, _service, _entities, introspection', async () => {
    const documents = [
      '{ quantumRuns { totalCount } }',
      'mutation { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4 }) { id } }',
      '{ _service { sdl } }',
      '{ _entities(representations: [{ __typename: "QuantumRun", id: "00000000-0000-0000-0000-000000000000" }]) { __typename } }',
      '{ __schema { queryType { name } } }',
    ];
    for (const query of documents) {
      for (const key of [FLEET, OPERATOR, undefined]) {
        const res = await post(optimization, JSON.stringify({ query }), key ? { 'x-api-key': key } : {});
        expect(res.status, `${query} with ${key}`).toBe(401);
        expect(((await res.json()) as { code: string }).code).toBe('UNAUTHENTICATED');
      }
    }
  });

  it('judges a signed call by its own SDL: a principal without the scope is 403, with it the call runs', async () => {
    const body = JSON.stringify({ query: '{ quantumRuns { totalCount } }' });
    const denied = await post(optimization, body, { [PRINCIPAL_HEADER]: signer.sign(fleetReader, call(optimization, body)) });
    expect(denied.status).toBe(403);
    const answer = (await denied.json()) as { errors: { extensions: { code: string; denied: { field: string }[] } }[] };
    expect(answer.errors[0]!.extensions.code).toBe('FORBIDDEN');
    expect(answer.errors[0]!.extensions.denied.map((d) => d.field)).toEqual(['Query.quantumRuns']);
    const allowed = await post(optimization, body, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, body)) });
    expect(allowed.status).toBe(200);
    expect(((await allowed.json()) as { data: unknown }).data).toEqual({ quantumRuns: { totalCount: 0 } });
  });

  it("runs its part of the pipeline on a signed call: the request limits (twice the gateway's) before validation and authorization", async () => {
    // 40 aliases: over a subgraph server's 30 (the gateway's 15, twice), whatever the principal may read.
    const deep = `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: __typename`).join(' ')} quantumRuns { totalCount } }`;
    const body = JSON.stringify({ query: deep });
    const refused = await post(optimization, body, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, body)) });
    expect(refused.status).toBe(400);
    const answer = (await refused.json()) as { code: string; detail: string };
    expect(answer.code).toBe('ALIAS_LIMIT_EXCEEDED');
    expect(answer.detail).toContain('the limit is 30');
    // Not a body a subgraph takes (no operation text): 400, nothing run.
    const none = JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash: 'a'.repeat(64) } } });
    expect((await post(optimization, none, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, none)) })).status).toBe(400);
    // The same principal, within the limits: it runs.
    const fine = JSON.stringify({ query: '{ quantumRuns { edges { node { id } } } }' });
    expect((await post(optimization, fine, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, fine)) })).status).toBe(200);
  });

  it('a captured header runs nothing else: another body, another idempotency key, another subgraph, after 30 s, with another secret, or a second time', async () => {
    const body = JSON.stringify({ query: '{ quantumRuns { totalCount } }' });
    const header = signer.sign(runner, call(optimization, body));
    // The same header with a mutation in the body.
    const other = JSON.stringify({ query: 'mutation { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4 }) { id } }' });
    expect((await post(optimization, other, { [PRINCIPAL_HEADER]: header })).status).toBe(401);
    // Other variables are another body too.
    const withVars = JSON.stringify({ query: 'query($f: Int) { quantumRuns(first: $f) { totalCount } }', variables: { f: 1 } });
    const signedVars = signer.sign(runner, call(optimization, withVars));
    expect((await post(optimization, withVars.replace('"f":1', '"f":2'), { [PRINCIPAL_HEADER]: signedVars })).status).toBe(401);
    // Signed for the rental subgraph, sent to optimization.
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, body, 'rental')) })).status).toBe(401);
    // Made 31 s ago.
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: signer.sign(runner, call(optimization, body), Date.now() - 31_000) })).status).toBe(401);
    // Another deployment's secret.
    const forged = PrincipalSigner.from('y'.repeat(40))!.sign(runner, call(optimization, body));
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: forged })).status).toBe(401);
    // The header as signed, with the body it was signed for: it runs, once. Sent again within its 30 s it is
    // refused: the subgraph server keeps the nonce of every header it accepted until it expires.
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: header })).status).toBe(200);
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: header })).status).toBe(401);
    // The Idempotency-Key is under the signature: the same call under another key is another call.
    const keyed = signer.sign(runner, { ...call(optimization, body), idempotencyKey: 'change-0001' });
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: keyed, 'idempotency-key': 'change-0002' })).status).toBe(401);
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: keyed })).status).toBe(401);
    expect((await post(optimization, body, { [PRINCIPAL_HEADER]: keyed, 'idempotency-key': 'change-0001' })).status).toBe(200);
  });

  it('a WebSocket subscription needs its own signature, and is judged by the SDL', async () => {
    const client = createClient({ url: optimization.replace('http', 'ws'), webSocketImpl: WebSocket, lazy: true, retryAttempts: 0 });
    const first = (payload: { query: string; extensions?: Record<string, unknown> }) =>
      new Promise<unknown>((resolve) => {
        const stop = client.subscribe(payload, {
          next: (value) => {
            stop();
            resolve(value);
          },
          error: (error) => resolve(error),
          complete: () => resolve('complete'),
        });
      });
    const query = 'subscription { quantumRunCompleted { cursor } }';
    const unsigned = await first({ query });
    expect(JSON.stringify(unsigned)).toContain('UNAUTHENTICATED');
    const signedFor = (p: Principal) => ({
      query,
      extensions: {
        [PRINCIPAL_HEADER]: signer.sign(p, { subgraph: 'optimization', method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody({ query }) }),
      },
    });
    expect(JSON.stringify(await first(signedFor(fleetReader)))).toContain('FORBIDDEN');
    // A header signed for another document does not open this one.
    const other = signer.sign(runner, {
      subgraph: 'optimization',
      method: 'SUBSCRIBE',
      path: '/graphql',
      body: subscriptionBody({ query: 'subscription { vesselPositionsChanged { tick } }' }),
    });
    expect(JSON.stringify(await first({ query, extensions: { [PRINCIPAL_HEADER]: other } }))).toContain('UNAUTHENTICATED');
    await client.dispose();
  });

  it('a socket that carries no signed operation is closed (4401) once the connection-init timeout passes', async () => {
    const socket = new WebSocket(optimization.replace('http', 'ws'), 'graphql-transport-ws');
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
    );
    const acked = new Promise<void>((resolve) => socket.once('message', () => resolve()));
    await new Promise<void>((resolve, reject) => socket.once('open', resolve).once('error', reject));
    socket.send(JSON.stringify({ type: 'connection_init' }));
    await acked;
    expect(await closed).toEqual({ code: 4401, reason: 'Unauthorized: no signed operation' });
  });

  it('the gateway itself still serves every subgraph (its calls are signed), and /health names URLs to operators only', async () => {
    const res = await gql(server.url, '{ fleetSummary { total } }', {}, { 'x-api-key': FLEET });
    expect(res.errors).toBeUndefined();
    expect(res.data?.['fleetSummary'].total).toBeGreaterThan(0);
    const anonymous = (await (await fetch(`${server.url}/health`)).json()) as { subgraphs: Record<string, Record<string, unknown>> };
    const partner = (await (await fetch(`${server.url}/health`, { headers: { 'x-api-key': FLEET } })).json()) as typeof anonymous;
    const operator = (await (await fetch(`${server.url}/health`, { headers: { 'x-api-key': OPERATOR } })).json()) as typeof anonymous;
    for (const body of [anonymous, partner]) expect(JSON.stringify(body)).not.toContain('http://');
    expect(operator.subgraphs['optimization']!['url']).toBe(optimization);
  });
});

describe('without PRINCIPAL_SECRET', () => {
  const module = subgraphs.find((m) => m.name === 'prediction')!;
  const base = { PORT: '0', DATA_DIR: ':memory:', FEATURES_DATA_DIR: ':memory:', LOG_LEVEL: 'silent' };
  it('a subgraph server refuses to start, on any interface, with credentials or in demo mode, saying why', async () => {
    for (const env of [
      { ...base, API_KEYS: OPERATOR, HOST: '0.0.0.0' },
      { ...base, API_KEYS: OPERATOR, HOST: '127.0.0.1' },
      { ...base, HOST: '127.0.0.1' },
    ]) {
      await expect(startSubgraphServer({ config: loadConfig(env), module })).rejects.toThrow(
        /PRINCIPAL_SECRET: needed by a subgraph server, which serves only calls its gateway signed/,
      );
    }
  });
  it('a gateway with SUBGRAPH_URLS refuses to start, with credentials or in demo mode', async () => {
    for (const env of [
      { ...base, HOST: '127.0.0.1', API_KEYS: OPERATOR },
      { ...base, HOST: '127.0.0.1' },
    ]) {
      await expect(startServer({ config: loadConfig({ ...env, SUBGRAPH_URLS: 'prediction=http://127.0.0.1:9/graphql' }) })).rejects.toThrow(
        /PRINCIPAL_SECRET: needed with SUBGRAPH_URLS/,
      );
    }
  });
});

describe('a subgraph server that answers calls nobody signed', () => {
  /** A server at the prediction subgraph's URL that answers everything, and what it was sent. */
  let open: Server;
  let received: { signed: boolean; credential: boolean }[];
  let refuses: boolean;
  let server: TestServer;
  beforeAll(async () => {
    received = [];
    refuses = false;
    open = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        const signed = request.headers[PRINCIPAL_HEADER] !== undefined;
        received.push({ signed, credential: request.headers['x-api-key'] !== undefined || request.headers.authorization !== undefined });
        if (!signed && refuses) return void response.writeHead(401, { 'content-type': 'application/json' }).end('{}');
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{"__typename":"Query"}}');
      });
    });
    await new Promise<void>((resolve) => open.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(open.address() as AddressInfo).port}/graphql`;
    server = await startTestServer({ env: { API_KEYS: OPERATOR, PRINCIPAL_SECRET: SECRET, SUBGRAPH_URLS: `prediction=${url}` } });
  });
  afterAll(async () => {
    await server?.close();
    open?.closeAllConnections();
    await new Promise<void>((resolve) => open?.close(() => resolve()));
  });

  it('is checked at start, is not ready in /health, and is never routed to: no signed call, no credential reaches it', async () => {
    type Health = { ready: boolean; subgraphs: Record<string, Record<string, unknown>> };
    const health = async (key?: string) => (await (await fetch(`${server.url}/health`, key ? { headers: { 'x-api-key': key } } : {})).json()) as Health;
    await until(
      async () => (await health(OPERATOR)).subgraphs['prediction']!['refuses_unsigned'] === false,
      'the start check to find it answering unsigned calls',
    );
    const operator = await health(OPERATOR);
    expect(operator.ready).toBe(false);
    expect(operator.subgraphs['prediction']).toMatchObject({ ready: false, refuses_unsigned: false });
    expect(operator.subgraphs['rental']).toEqual({ ready: true });
    // A partner sees only that it is not ready.
    expect((await health()).subgraphs['prediction']).toEqual({ ready: false });
    const res = await gql(server.url, '{ predictionModels { __typename } }', {}, { 'x-api-key': OPERATOR });
    expect(res.errors?.[0]?.extensions?.['code']).toBe('UPSTREAM_UNAVAILABLE');
    expect(received.length).toBeGreaterThan(0);
    expect(received.filter((r) => r.signed || r.credential)).toEqual([]);
    // Once it refuses them, it is routed to again at its next call.
    refuses = true;
    await until(async () => (await health(OPERATOR)).subgraphs['prediction']!['refuses_unsigned'] === true, 'the next check to find it refusing');
    await gql(server.url, '{ predictionModels { __typename } }', {}, { 'x-api-key': OPERATOR });
    expect(received.filter((r) => r.signed).length).toBeGreaterThan(0);
    expect(received.filter((r) => r.credential)).toEqual([]);
  });
});
