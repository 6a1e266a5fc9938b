import { execute, parse } from 'graphql';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TRANSITIONS, type SessionState } from '../../../subgraphs/bonding/state-machine.js';
import { gql, rest } from '../../support/http.js';
import { startTestServer, setups, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';
import { SYSTEM_PRINCIPAL, type Principal } from '../../../platform/principal.js';
import { BondingService } from '../../../subgraphs/bonding/service.js';
import { BondingStore } from '../../../subgraphs/bonding/store.js';
import { createLoaders, type BondingContext } from '../../../subgraphs/bonding/context.js';
import { until, waitFor } from '../../support/wait.js';

const path = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  kind: 'fiber',
  latency_ms: 10,
  loss_pct: 0.05,
  capacity_mbps: 500,
  ...extra,
});

const SESSION = `id userId state stateReason seed tick paths { id kind up latencyMs outageProbability sharedRisk }
  planes { data { health lastAction } control { health lastAction } security { health lastAction } intelligence { health lastAction } }`;

describe.each(setups)('bonding over REST and GraphQL ($name)', ({ backend, mode }) => {
  let url: string;
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      backend,
      mode,
      env: { BONDING_TICK_MS: '100', BONDING_MAX_OPEN_SESSIONS_PER_USER: '3' },
    });
    url = server.url;
    // Distributed mode starts four servers: generous on a busy machine.
  }, 180_000);
  // Every open session runs its link model each tick: close what a test left open, so later tests do not
  // share the machine with a growing number of them.
  let bondingDown = false;
  afterEach(async () => {
    if (bondingDown) return;
    const db = server.subgraphServers.get('bonding')?.runtime.db ?? server.db;
    await db.query(`UPDATE bonding_sessions SET state = 'closed', closed_at = now(), state_reason = 'test cleanup' WHERE state <> 'closed'`);
  });

  const status = (query: string) => rest(url, 'GET', `/bonding/api/bonding/status${query}`);

  it('GET /bonding/health answers with the sessions by state and names the key source a simulation', async () => {
    const res = await rest(url, 'GET', '/bonding/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'bonding', version: '1.0', link_model: { tick_ms: 100, simulated_seconds_per_tick: 60 } });
    expect(res.body['key_source']).toMatch(/simulated in software \(no quantum hardware\)/);
  });

  it('starts a session for the sandbox user by default, negotiates, then bonds; status follows it', async () => {
    const start = await rest(url, 'POST', '/bonding/api/bonding/start?seed=42');
    expect(start.status).toBe(200);
    expect(start.body).toMatchObject({ user_id: 'sandbox', state: 'negotiating', seed: 42, tick: 0, closed_at: null });
    expect(start.body['session_id']).toMatch(/^BS-[0-9a-f]{12}$/);
    expect(start.body['paths'].map((p: { id: string; kind: string }) => `${p.id}:${p.kind}`)).toEqual([
      'fiber-1:fiber',
      'cable-1:cable',
      '5g-1:5g',
      'lte-1:lte',
      'sat-1:satellite',
    ]);
    expect(start.body['planes']['security']).toMatchObject({ health: 'degraded', last_action: 'no session key yet' });
    const id = start.body['session_id'] as string;
    const moved = await waitFor(async () => {
      const s = await status(`?session_id=${id}`);
      return s.body['tick'] >= 2 ? s : null;
    }, 'the first link-model step');
    expect(moved.status).toBe(200);
    expect(['bonded', 'degraded', 'down']).toContain(moved.body['state']);
    expect(moved.body['planes']['control']['last_action']).toMatch(/negotiating -> /);
    expect(moved.body['planes']['data']['last_action']).toMatch(/split traffic over|no path up/);
    expect(moved.body['simulated_seconds']).toBe(60 * moved.body['tick']);
    // Without a session id: the sandbox user's newest open session.
    const current = await status('');
    expect(current.status).toBe(200);
    expect(current.body['user_id']).toBe('sandbox');
    // A user without sessions, and a session of another user.
    expect((await status('?user_id=nobody.here')).status).toBe(404);
    expect((await status(`?user_id=someone-else&session_id=${id}`)).status).toBe(404);
  });

  it('validates user_id: 1 to 64 of [A-Za-z0-9_.-], else 400 naming user_id; nothing is created', async () => {
    for (const bad of ['bad%20user', '', 'x'.repeat(65), '%C3%A9t%C3%A9', 'a%2Fb']) {
      const res = await rest(url, 'POST', `/bonding/api/bonding/start?user_id=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'user_id' }] });
    }
    const ok = await rest(url, 'POST', `/bonding/api/bonding/start?user_id=${'u'.repeat(64)}`);
    expect(ok.status).toBe(200);
    const g = await gql(url, 'mutation { startBondingSession(userId: "no spaces") { id } }');
    expect(g.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'userId' }] });
    expect((await status('?session_id=BS-123')).body).toMatchObject({ status: 400, errors: [{ field: 'session_id' }] });
    expect((await rest(url, 'POST', '/bonding/api/bonding/start?seed=-1')).status).toBe(400);
  });

  it('caps open sessions per user (409), closes sessions (409 twice), frees a place', async () => {
    const user = `cap-${backend}-${mode}`;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await rest(url, 'POST', `/bonding/api/bonding/start?user_id=${user}`);
      expect(res.status).toBe(200);
      ids.push(res.body['session_id']);
    }
    const fourth = await rest(url, 'POST', `/bonding/api/bonding/start?user_id=${user}`);
    expect(fourth.status).toBe(409);
    expect(fourth.body['detail']).toMatch(/already has 3 open bonding sessions/);
    const closed = await rest(url, 'POST', `/bonding/api/bonding/close?session_id=${ids[0]}`);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ state: 'closed', state_reason: 'closed on request' });
    expect(closed.body['closed_at']).toEqual(expect.any(String));
    expect((await rest(url, 'POST', `/bonding/api/bonding/close?session_id=${ids[0]}`)).status).toBe(409);
    expect((await rest(url, 'POST', '/bonding/api/bonding/close?session_id=BS-000000000000')).status).toBe(404);
    expect((await rest(url, 'POST', `/bonding/api/bonding/start?user_id=${user}`)).status).toBe(200);
    // A closed session's link model has stopped: an open one steps twice meanwhile, the closed one not.
    const before = (await status(`?session_id=${ids[0]}`)).body['tick'];
    const openBefore = (await status(`?session_id=${ids[1]}`)).body['tick'] as number;
    await until(async () => (await status(`?session_id=${ids[1]}`)).body['tick'] >= openBefore + 2, 'two steps of an open session');
    expect((await status(`?session_id=${ids[0]}`)).body['tick']).toBe(before);
    const qkd = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: ids[0], bits: 128 });
    expect(qkd.status).toBe(409);
  });

  it('POST /bonding/api/quantum/optimize picks the least correlated pair and explains it', async () => {
    const res = await rest(url, 'POST', '/bonding/api/quantum/optimize', {
      paths: [
        path('fiber-a', { shared_risk: ['conduit:main-st'] }),
        path('cable-a', { kind: 'cable', latency_ms: 14, shared_risk: ['conduit:main-st'] }),
        path('lte-a', { kind: 'lte', latency_ms: 45, capacity_mbps: 60, loss_pct: 0.5, shared_risk: ['cell-site:m1'] }),
        path('sat-a', { kind: 'satellite', latency_ms: 600, capacity_mbps: 100 }),
        path('dsl-a', { kind: 'dsl', up: false }),
      ],
      constraints: { max_latency_ms: 100, min_combined_capacity_mbps: 400 },
    });
    expect(res.status).toBe(200);
    const pair = res.body['pair'];
    // Cable's own faults are rarer than fiber's in the link model (kind profiles), and both share the duct.
    expect([pair.a, pair.b].sort()).toEqual(['cable-a', 'lte-a']);
    expect(pair.shared_risk).toEqual([]);
    expect(pair.correlation).toBeCloseTo(0, 9);
    expect(pair.joint_outage).toBeCloseTo(pair.outage_a * pair.outage_b, 15);
    expect(res.body['runner_up']).toMatchObject({ a: 'fiber-a', b: 'lte-a' });
    expect(res.body['ruled_out']).toEqual(
      expect.arrayContaining([
        { constraint: 'up', limit: null, count: 1, examples: ['dsl-a'] },
        { constraint: 'max_latency_ms', limit: 100, count: 1, examples: ['sat-a'] },
      ]),
    );
    expect(res.body['weights'].map((w: { path_id: string }) => w.path_id)).toEqual(['fiber-a', 'cable-a', 'lte-a']);
    expect(res.body['explanation']).toMatch(/^cable-a \+ lte-a: both down with probability/);
    expect(res.body['method']).toMatch(/^exact/);

    const none = await rest(url, 'POST', '/bonding/api/quantum/optimize', {
      paths: [path('a'), path('b', { latency_ms: 200 })],
      constraints: { max_latency_ms: 100 },
    });
    expect(none.status).toBe(200);
    expect(none.body).toMatchObject({ feasible: false, pair: null, paths_usable: 1 });
    expect(none.body['explanation']).toMatch(/No feasible pair: 1 of 2 paths usable \(1 over maxLatencyMs 100\)/);
  });

  it('optimize: an invalid shape is 400 naming each field; nothing beyond 1000 paths', async () => {
    const bad = await rest(url, 'POST', '/bonding/api/quantum/optimize', {
      paths: [path('a', { latency_ms: 'fast' }), { id: 'b', latency_ms: 1, loss_pct: 0, capacity_mbps: 1 }, path('a', { kind: 'pigeon' })],
      constraints: 'none',
    });
    expect(bad.status).toBe(400);
    const fields = bad.body['errors'].map((e: { field: string }) => e.field).sort();
    expect(fields).toEqual(['constraints', 'paths[0].latency_ms', 'paths[2].kind']);
    const ranges = await rest(url, 'POST', '/bonding/api/quantum/optimize', {
      paths: [path('a', { loss_pct: 120 }), { id: 'b', latency_ms: 1, loss_pct: 0, capacity_mbps: 1 }, path('a')],
      constraints: { max_latency_ms: -1 },
    });
    expect(ranges.status).toBe(400);
    expect(ranges.body['errors']).toEqual(
      expect.arrayContaining([
        { field: 'paths[0].loss_pct', message: 'must be at most 100' },
        { field: 'paths[1].outage_probability', message: 'is required when kind is not given' },
        { field: 'paths[2].id', message: 'duplicates the id of item 0' },
        { field: 'constraints.max_latency_ms', message: 'must be at least 0' },
      ]),
    );
    expect((await rest(url, 'POST', '/bonding/api/quantum/optimize', { constraints: {} })).body).toMatchObject({
      status: 400,
      errors: [{ field: 'paths', message: 'is required' }],
    });
    const many = Array.from({ length: 1001 }, (_, i) => path(`p${i}`));
    const tooMany = await rest(url, 'POST', '/bonding/api/quantum/optimize', { paths: many });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body['errors']).toEqual([{ field: 'paths', message: 'must have at most 1000 items' }]);
  });

  it('optimize answers hundreds of paths in milliseconds', async () => {
    const paths = Array.from({ length: 500 }, (_, i) => ({
      id: `p${i}`,
      kind: ['fiber', 'cable', '5g', 'lte', 'satellite'][i % 5],
      latency_ms: 5 + ((i * 37) % 200),
      loss_pct: ((i * 13) % 100) / 50,
      capacity_mbps: 50 + ((i * 97) % 950),
      shared_risk: [`conduit:d${i % 40}`, `cell-site:m${i % 23}`],
    }));
    const res = await rest(url, 'POST', '/bonding/api/quantum/optimize', { paths, constraints: { max_latency_ms: 120 } });
    expect(res.status).toBe(200);
    expect(res.body['feasible']).toBe(true);
    expect(res.body['paths_considered']).toBe(500);
    // Milliseconds on an idle machine (bench/bonding.ts); the bound leaves room for a busy one.
    expect(res.body['elapsed_ms']).toBeLessThan(250);
  });

  it('POST /bonding/api/qkd/generate: a hybrid key with honest figures; seeded runs repeat; an eavesdropper aborts it', async () => {
    const start = await rest(url, 'POST', '/bonding/api/bonding/start?user_id=qkd-user');
    const id = start.body['session_id'] as string;
    const res = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 256, seed: 5, noise: 0.03 });
    expect(res.status).toBe(200);
    const k = res.body;
    expect(k).toMatchObject({
      session_id: id,
      status: 'completed',
      bits: 256,
      final_bits: 256,
      residual_errors: 0,
      eavesdropper_detected: false,
      kem: 'ML-KEM-768',
      kdf: 'HKDF-SHA256',
      simulated: true,
      qber_threshold: 0.11,
    });
    expect(k['key']).toMatch(/^[0-9a-f]{64}$/);
    expect(k['key_id']).toMatch(/^QK-[0-9a-f]{16}$/);
    expect(k['fingerprint']).toMatch(/^[0-9a-f]{32}$/);
    expect(Math.abs(k['sifted_bits'] / k['raw_bits'] - 0.5)).toBeLessThan(0.03);
    expect(Math.abs(k['qber'] - 0.03)).toBeLessThan(0.015);
    expect(k['qber_upper_bound']).toBeGreaterThan(k['qber']);
    expect(k['secure_bits']).toBeGreaterThanOrEqual(256);
    expect(k['leaked_bits']).toBeGreaterThan(64);
    const again = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 256, seed: 5, noise: 0.03 });
    expect(again.body['key']).toBe(k['key']);
    expect(again.body['key_id']).not.toBe(k['key_id']);
    const unseeded = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 256, seed: 6, noise: 0.03 });
    expect(unseeded.body['key']).not.toBe(k['key']);

    const eve = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 256, intercept_fraction: 1, noise: 0 });
    expect(eve.status).toBe(200);
    expect(eve.body).toMatchObject({ status: 'aborted', key: null, key_id: null, fingerprint: null, eavesdropper_detected: true, final_bits: 0 });
    expect(Math.abs(eve.body['qber'] - 0.25)).toBeLessThan(0.03);
    expect(eve.body['reason']).toMatch(/exceeds the 11% threshold/);
    const after = await status(`?session_id=${id}`);
    expect(after.body['planes']['security']).toMatchObject({ health: 'critical' });
    expect(after.body['planes']['security']['last_action']).toMatch(/^aborted key generation/);
    expect(after.body['last_key']).toMatchObject({ status: 'aborted', eavesdropper_detected: true, key_id: null });
  });

  it('qkd: bits outside 64..4096 or malformed input is 400, an unknown session 404', async () => {
    const start = await rest(url, 'POST', '/bonding/api/bonding/start?user_id=qkd-errors');
    const id = start.body['session_id'] as string;
    for (const bits of [63, 4097, 100.5, '256']) {
      const res = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits });
      expect(res.status, String(bits)).toBe(400);
      expect(res.body['errors'][0]['field']).toBe('bits');
    }
    const ranges = await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 128, noise: 0.9, intercept_fraction: 2 });
    expect(ranges.body['errors'].map((e: { field: string }) => e.field).sort()).toEqual(['intercept_fraction', 'noise']);
    expect((await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: 'BS-00000000000f', bits: 128 })).status).toBe(404);
    expect((await rest(url, 'POST', '/bonding/api/qkd/generate', { session_id: 'nope', bits: 128 })).body).toMatchObject({
      status: 400,
      errors: [{ field: 'session_id' }],
    });
    expect((await rest(url, 'POST', '/bonding/api/qkd/generate', { bits: 128 })).body).toMatchObject({
      status: 400,
      errors: [{ field: 'session_id', message: 'is required' }],
    });
    const g = await gql(url, 'mutation($i: QuantumKeyInput!) { generateQuantumKey(input: $i) { status } }', { i: { sessionId: id, bits: 8 } });
    expect(g.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'bits', message: 'must be at least 64' }] });
  });

  it('GraphQL: custom paths, correlation matrix, recommendation under constraints, lists', async () => {
    const res = await gql(
      url,
      `mutation { startBondingSession(userId: "gql.user", seed: 9, paths: [
        { id: "f1", kind: FIBER, sharedRisk: ["conduit:a"] }, { id: "c1", kind: CABLE, sharedRisk: ["conduit:a"] },
        { id: "m1", kind: FIVE_G, sharedRisk: ["cell-site:x"] }]) {
        ${SESSION} correlation { pathIds matrix } recommendation(constraints: { maxLatencyMs: 1000 }) { feasible pair { a b sharedRisk } } } }`,
    );
    expect(res.errors).toBeUndefined();
    const s = res.data!['startBondingSession'];
    expect(s).toMatchObject({ userId: 'gql.user', state: 'NEGOTIATING', seed: 9, tick: 0 });
    expect(s.paths.map((p: { kind: string }) => p.kind)).toEqual(['FIBER', 'CABLE', 'FIVE_G']);
    expect(s.correlation.pathIds).toEqual(['f1', 'c1', 'm1']);
    const m = s.correlation.matrix as number[][];
    expect(m[0]![0]).toBe(1);
    expect(m[0]![1]).toBeGreaterThan(0.1);
    expect(m[0]![2]).toBe(0);
    expect(m[1]![0]).toBe(m[0]![1]);
    expect(s.recommendation.pair.sharedRisk).toEqual([]);
    const list = await gql(url, '{ bondingSessions(userId: "gql.user", first: 5) { id } currentBondingSession(userId: "gql.user") { id } }');
    expect(list.data!['bondingSessions']).toEqual([{ id: s.id }]);
    expect(list.data!['currentBondingSession']).toEqual({ id: s.id });
    const dup = await gql(url, 'mutation { startBondingSession(paths: [{ id: "a", kind: LTE }, { id: "a", kind: DSL }]) { id } }');
    expect(dup.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'paths.1.id' }] });
    const unknown = await gql(url, '{ bondingSession(id: "BS-aaaaaaaaaaaa") { id } }');
    expect(unknown.data!['bondingSession']).toBeNull();
  });

  it('bondingSessionUpdated streams the state machine and metrics, resumable by cursor, and ends on close', async () => {
    const cursor = (await gql(url, '{ bondingEventCursor }')).data!['bondingEventCursor'] as string;
    const start = await gql(url, 'mutation { startBondingSession(userId: "stream", seed: 3) { id } }');
    const id = start.data!['startBondingSession'].id as string;
    const c = wsClient(url);
    const query = `subscription($id: ID!, $after: ID) { bondingSessionUpdated(sessionId: $id, after: $after) {
      cursor sessionId kind state previousState tick reason paths { id up } session { id } } }`;
    type Ev = { bondingSessionUpdated: { cursor: string; kind: string; state: string; previousState: string | null; tick: number } };
    const events = new Collector<Ev>(c.client, query, { id, after: cursor });
    await events.until((e) => e.results.length >= 4);
    const seen = events.data.map((d) => d.bondingSessionUpdated);
    expect(seen[0]).toMatchObject({ kind: 'STARTED', state: 'NEGOTIATING', tick: 0 });
    expect(seen[1]).toMatchObject({ kind: 'STATE', previousState: 'NEGOTIATING', tick: 1 });
    expect(seen[2]).toMatchObject({ kind: 'METRICS', tick: 1 });
    expect(seen[3]).toMatchObject({ kind: 'METRICS', tick: 2 });
    // Resume from the third event: exactly what followed it.
    const resumed = new Collector<Ev>(c.client, query, { id, after: seen[2]!.cursor });
    await resumed.until((e) => e.results.length >= 2);
    expect(resumed.data[0]!.bondingSessionUpdated.cursor).toBe(seen[3]!.cursor);
    const close = await gql(url, `mutation { closeBondingSession(id: "${id}") { state } }`);
    expect(close.data!['closeBondingSession']).toEqual({ state: 'CLOSED' });
    await events.until((e) => e.completed);
    const last = events.data.at(-1)!.bondingSessionUpdated;
    expect(last).toMatchObject({ kind: 'CLOSED', state: 'CLOSED' });
    // Every state change is a move the documented state machine allows.
    for (const e of events.data.map((d) => d.bondingSessionUpdated).filter((x) => x.kind === 'STATE' || x.kind === 'CLOSED')) {
      const from = e.previousState!.toLowerCase() as SessionState;
      expect(TRANSITIONS[from]).toContain(e.state.toLowerCase());
    }
    const ticks = events.data.filter((d) => d.bondingSessionUpdated.kind === 'METRICS').map((d) => d.bondingSessionUpdated.tick);
    expect(ticks).toEqual(ticks.map((_, i) => i + 1));
    const bad = new Collector(c.client, query, { id: 'BS-bbbbbbbbbbbb' });
    await bad.until((e) => e.results.length > 0 || e.error !== undefined || e.completed);
    expect(JSON.stringify(bad.results.length ? bad.results : bad.error)).toContain('NOT_FOUND');
    await c.dispose();
  });

  it("outside demo mode, keys are distilled on and shown to the session's own user only", async () => {
    const instance = server.subgraphs.get('bonding')!;
    const start = await rest(url, 'POST', '/bonding/api/bonding/start?user_id=keyed');
    // This server runs in demo mode; the service is made as a server with credentials would make it, over
    // the same database.
    const db = server.subgraphServers.get('bonding')?.runtime.db ?? server.db;
    const store = new BondingStore(db, { tickMs: 100, simSecondsPerTick: 60, sessionTtlSeconds: 3600, maxOpenSessionsPerUser: 3 });
    const service = new BondingService(store, false);
    const run = (principal: Principal) => {
      const ctx = instance.context({ headers: {}, principal }) as BondingContext;
      const contextValue: BondingContext = { ...ctx, service, loaders: createLoaders(service, principal) };
      return execute({
        schema: instance.schema,
        document: parse('mutation($i: QuantumKeyInput!) { generateQuantumKey(input: $i) { status key fingerprint } }'),
        variableValues: { i: { sessionId: start.body['session_id'], bits: 128, seed: 1 } },
        contextValue,
      });
    };
    // An operator sees the session but is not its user: no key.
    const operator = await run(SYSTEM_PRINCIPAL);
    expect(operator.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    // Another user does not see it at all.
    const other = await run({ id: 'someone-else', tenant: 't', scopes: ['bonding:use'] });
    expect(other.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    // The same name in another tenant is another principal: the session is not its to see.
    const namesake = await run({ id: 'keyed', tenant: 't', scopes: ['bonding:use'] });
    expect(namesake.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    // Demo mode started it for user `keyed` of the demo tenant: that principal distils.
    const owner = await run({ id: 'keyed', tenant: 'demo', scopes: ['bonding:use'] });
    expect(owner.errors).toBeUndefined();
    expect(owner.data!['generateQuantumKey']).toMatchObject({
      status: 'COMPLETED',
      key: expect.stringMatching(/^[0-9a-f]{32}$/),
      fingerprint: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
  });

  it.runIf(mode === 'distributed')('with the bonding subgraph down: REST 502 with a JSON error, GraphQL UPSTREAM_UNAVAILABLE at its fields only', async () => {
    bondingDown = true;
    await server.subgraphServers.get('bonding')!.close();
    const r = await rest(url, 'GET', '/bonding/api/bonding/status');
    expect(r.status).toBe(502);
    expect(r.headers.get('content-type')).toContain('json');
    expect(r.body).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE' });
    expect((await rest(url, 'POST', '/bonding/api/quantum/optimize', { paths: [] })).status).toBe(502);
    expect((await rest(url, 'GET', '/bonding/health')).status).toBe(502);
    const q = await gql(url, '{ fleetSummary { total } currentBondingSession { id } }');
    expect(q.data).toEqual({ fleetSummary: { total: 15 }, currentBondingSession: null });
    expect(q.errors).toHaveLength(1);
    expect(q.errors![0]).toMatchObject({ path: ['currentBondingSession'], extensions: { code: 'UPSTREAM_UNAVAILABLE' } });
    // /health answers from a round of checks at most 250 ms old.
    await until(async () => (await rest(url, 'GET', '/health')).status === 503, 'health to report bonding down');
    const health = await rest(url, 'GET', '/health');
    expect(health.body).toMatchObject({ status: 'degraded', subgraphs: { rental: { ready: true }, bonding: { ready: false } } });
  });
});
