import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../../gateway/server.js';
import { startSubgraphServer, type RunningSubgraphServer } from '../../../gateway/subgraph-host/server.js';
import { loadConfig } from '../../../gateway/config.js';
import { gql, rest } from '../../support/http.js';
import type { Database } from '../../../platform/db.js';
import { optimization } from '../../../subgraphs/optimization/index.js';
import { OptimizationStore } from '../../../subgraphs/optimization/store.js';
import { dropSchema, startTestServer, setups, TEST_DATABASE_URL, type Backend, type Mode } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';
import { until, waitFor } from '../../support/wait.js';

const RUN = `id status problem size qubits depth shots backend fleetTick durationMs error
  instance { variables edges { u v weight } }
  result { energy optimalityRatio startRatio bestSampleRatio refined { ratio evaluations } baseline { ratio evaluations }
    optimum { energy method bruteForceAgrees } }`;

async function startRun(url: string, input: Record<string, unknown>) {
  return gql(url, `mutation($input: StartQuantumRunInput!) { startQuantumRun(input: $input) { ${RUN} } }`, { input });
}

async function finished(url: string, id: string) {
  return waitFor(
    async () => {
      const r = await gql(url, `query($id: ID!) { quantumRun(id: $id) { ${RUN} } }`, { id });
      const run = r.data?.['quantumRun'];
      return run && run.status !== 'RUNNING' ? run : null;
    },
    `run ${id}`,
    { timeoutMs: 30_000 },
  );
}

/**
 * The gateway and, in distributed mode, the optimization subgraph as its own server (the gateway keeps the
 * other subgraphs in process: one database fewer to start on a busy machine). PostgreSQL: one schema, shared.
 */
async function startTarget(
  backend: Backend,
  mode: Mode,
  env: Record<string, string>,
): Promise<{ url: string; db: Database; sub: RunningSubgraphServer | null }> {
  if (mode === 'one-process') {
    const server = await startTestServer({ backend, env });
    return { url: server.url, db: server.db, sub: null };
  }
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const base = {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    LOG_LEVEL: 'silent',
    PRINCIPAL_SECRET: randomBytes(24).toString('base64url'),
    ...(backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema } : {}),
    ...env,
  };
  const sub = await startSubgraphServer({ config: loadConfig(base), module: optimization });
  const gateway = await startServer({ config: loadConfig({ ...base, SUBGRAPH_URLS: `optimization=${sub.graphqlUrl}` }) });
  cleanups.push(async () => {
    await gateway.close();
    // The outage test has closed it already.
    await sub.close().catch(() => undefined);
    if (backend === 'postgres') await dropSchema(schema);
  });
  return { url: gateway.url, db: sub.runtime.db, sub };
}
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups) await c();
});

describe.each(setups)('optimization subgraph ($name)', ({ backend, mode }) => {
  let url: string;
  let db: Database;
  beforeAll(async () => {
    ({ url, db } = await startTarget(backend, mode, { FLEET_TICK_MS: '200', OPTIMIZATION_MAX_CONCURRENT_RUNS: '2' }));
  }, 180_000);

  it('instances sharing the database record one fleet tick per interval, however many try at once', async () => {
    const options = { seed: 7, size: 24, tickMs: 1, leaseMs: 15_000, owner: 'test-store', onEvents: () => undefined };
    const stores = await Promise.all([1, 2, 3, 4].map(() => OptimizationStore.open(db, options, new Date())));
    // One instant, a second ahead of the server's own ticker (which resumes once real time passes it).
    const at = new Date(Date.now() + 1000);
    const ticks = await Promise.all(stores.map((s) => s.tick(at)));
    const won = ticks.filter((t): t is number => t !== null);
    expect(won).toHaveLength(1);
    const fleet = (await rest(url, 'GET', '/optimization/fleet')).body;
    expect(fleet['tick']).toBeGreaterThanOrEqual(won[0]!);
    expect(fleet['vessel_count']).toBe(24);
  });

  it('health, status and the fleet snapshot (AIS fields, 9-digit MMSIs, a simulator backend)', async () => {
    const health = await rest(url, 'GET', '/optimization/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ service: 'optimization', version: '1.0', status: 'ok', ready: true, database: true });
    const status = await rest(url, 'GET', '/optimization/status');
    expect(status.body['backend']).toMatchObject({ name: 'statevector-simulator', kind: 'SIMULATOR', max_qubits: 24 });
    expect(status.body['limits']).toMatchObject({ max_qubits: 24, max_concurrent_runs: 2 });
    const fleet = await rest(url, 'GET', '/optimization/fleet');
    expect(fleet.status).toBe(200);
    expect(fleet.body['vessel_count']).toBe(24);
    for (const v of fleet.body['vessels']) {
      expect(v.mmsi).toMatch(/^\d{9}$/);
      expect(v).toEqual({
        mmsi: v.mmsi,
        name: expect.any(String),
        type: expect.stringMatching(/^(cargo|tanker|container|passenger|tug|pilot|fishing)$/),
        lane: expect.any(String),
        position: { latitude: expect.any(Number), longitude: expect.any(Number) },
        speed_over_ground: expect.any(Number),
        course_over_ground: expect.any(Number),
        heading: expect.any(Number),
        timestamp: fleet.body['timestamp'],
      });
      expect(Math.abs(v.position.latitude - 52)).toBeLessThan(0.5);
    }
    expect(fleet.body['speed_zones'].length).toBeGreaterThan(0);
  });

  it('the simulation moves the fleet: ticks advance and a vessel has a recent track, newest first', async () => {
    const first = (await rest(url, 'GET', '/optimization/fleet')).body;
    const mmsi = first['vessels'][0].mmsi as string;
    const later = await waitFor(async () => {
      const r = await gql(
        url,
        `query($m: ID!) { vesselFleet { tick } vessel(mmsi: $m) { track(last: 3) { tick position { latitude longitude } timestamp } } }`,
        { m: mmsi },
      );
      return r.data!['vesselFleet'].tick >= first['tick'] + 2 ? r.data! : null;
    }, 'two fleet ticks');
    const track = later['vessel'].track as { tick: number; position: { latitude: number } }[];
    expect(track).toHaveLength(3);
    expect(track[0]!.tick).toBeGreaterThan(track[1]!.tick);
    expect(track[1]!.tick).toBeGreaterThan(track[2]!.tick);
    const bad = await gql(url, '{ vessel(mmsi: "12345") { name } }');
    expect(bad.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'mmsi', message: 'must be a 9-digit MMSI' }] });
  });

  it('a QAOA run on 3-regular MaxCut completes in a worker with its ratios recorded (p = 2 >= 0.7559)', async () => {
    const started = await startRun(url, { problem: 'REGULAR3_MAXCUT', size: 10, depth: 2, shots: 2000, seed: 3 });
    expect(started.errors).toBeUndefined();
    const run = started.data!['startQuantumRun'];
    expect(run).toMatchObject({ status: 'RUNNING', qubits: 10, depth: 2, shots: 2000, backend: 'statevector-simulator', fleetTick: null, result: null });
    const done = await finished(url, run.id);
    expect(done.status).toBe('COMPLETED');
    expect(done.result.optimalityRatio).toBeGreaterThanOrEqual(0.7559);
    expect(done.result.optimalityRatio).toBeLessThanOrEqual(1);
    expect(done.result.energy).toBeCloseTo(done.result.optimalityRatio * done.result.optimum.energy, 6);
    expect(done.result.optimum).toMatchObject({ method: 'BRANCH_AND_BOUND', bruteForceAgrees: true });
    expect(done.result.refined.ratio).toBeGreaterThanOrEqual(done.result.bestSampleRatio);
    expect(done.result.baseline.evaluations).toBe(done.result.refined.evaluations);
    // Its duration is recorded: the run simulated, optimized and sampled, which takes time.
    expect(done.durationMs).toBeGreaterThan(0);

    const listed = await rest(url, 'GET', '/optimization/quantum/runs?limit=100');
    const row = listed.body['runs'].find((r: { id: string }) => r.id === run.id);
    expect(row).toMatchObject({ status: 'completed', problem: 'regular3_maxcut', depth: 2, shots: 2000, backend: 'statevector-simulator' });
    expect(row.result.optimality_ratio).toBe(done.result.optimalityRatio);
    const one = await rest(url, 'GET', `/optimization/quantum/runs/${run.id}`);
    expect(one.body['result']['optimum']['bits']).toMatch(/^[01]{10}$/);
  }, 60_000);

  it('a convoy run is built from the fleet snapshot it names; the latest refined ratio is served', async () => {
    const started = await startRun(url, { problem: 'CONVOY_MAXCUT', size: 8, depth: 1 });
    expect(started.errors).toBeUndefined();
    const done = await finished(url, started.data!['startQuantumRun'].id);
    expect(done.status).toBe('COMPLETED');
    const fleet = (await rest(url, 'GET', '/optimization/fleet')).body;
    // The step it names is one the fleet has reached: from the first (0) to the newest.
    expect(done.fleetTick).toBeGreaterThanOrEqual(0);
    expect(done.fleetTick).toBeLessThanOrEqual(fleet['tick']);
    const mmsis = new Set(fleet['vessels'].map((v: { mmsi: string }) => v.mmsi));
    expect(done.instance.variables).toHaveLength(8);
    for (const m of done.instance.variables) expect(mmsis.has(m)).toBe(true);
    const latest = await rest(url, 'GET', '/optimization/quantum/latest/refined');
    expect(latest.status).toBe(200);
    expect(latest.body['run']['id']).toBe(done.id);
    expect(latest.body['refined_ratio']).toBe(done.result.refined.ratio);
    expect(latest.body['baseline_ratio']).toBe(done.result.baseline.ratio);
    expect(latest.body['optimality_ratio']).toBe(done.result.optimalityRatio);
  }, 60_000);

  it('refuses bad sizes, depths, too many qubits and runs too big before they start (400, nothing recorded)', async () => {
    const before = (await rest(url, 'GET', '/optimization/status')).body['runs']['total'];
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ problem: 'REGULAR3_MAXCUT', size: 9 }, 'input.size', /even/],
      [{ problem: 'CONVOY_MAXCUT', size: 2 }, 'input.size', /from 3 to 24/],
      [{ problem: 'BERTH_QUBO', size: 5 }, 'input.size', /from 2 to 4/],
      [{ problem: 'REGULAR3_MAXCUT', size: 8, depth: 0 }, 'input.depth', /at least 1/],
      [{ problem: 'REGULAR3_MAXCUT', size: 8, depth: 6 }, 'input.depth', /at most 5/],
      [{ problem: 'REGULAR3_MAXCUT', size: 8, shots: 0 }, 'input.shots', /at least 1/],
      [{ problem: 'REGULAR3_MAXCUT', size: 24, depth: 5, maxEvaluations: 500 }, 'input.maxEvaluations', /estimated at \d+ s/],
    ];
    for (const [input, field, message] of cases) {
      const r = await startRun(url, input);
      expect(r.data).toBeNull();
      expect(r.errors![0]!.extensions!['code']).toBe('BAD_USER_INPUT');
      expect(r.errors![0]!.extensions!['fields'][0]).toMatchObject({ field, message: expect.stringMatching(message) });
    }
    expect((await rest(url, 'GET', '/optimization/status')).body['runs']['total']).toBe(before);
  });

  it('bounds concurrent runs: of 4 started at once with a limit of 2, two run and two are refused (429)', async () => {
    await until(async () => (await rest(url, 'GET', '/optimization/status')).body['runs']['running'] === 0, 'no run running');
    // Runs long enough (about a second each at 20 qubits, depth 2) that none can finish while the four starts
    // are still arriving: a finished run frees its slot, and a third start would then rightly be accepted.
    const input = { problem: 'REGULAR3_MAXCUT', size: 20, depth: 2, maxEvaluations: 20, shots: 100 };
    const answers = await Promise.all([1, 2, 3, 4].map((seed) => startRun(url, { ...input, seed })));
    const ok = answers.filter((a) => !a.errors);
    const refused = answers.filter((a) => a.errors);
    expect(ok).toHaveLength(2);
    expect(refused).toHaveLength(2);
    for (const r of refused) expect(r.errors![0]!.extensions!['code']).toBe('RATE_LIMITED');
    await Promise.all(ok.map((a) => finished(url, a.data!['startQuantumRun'].id)));
  }, 90_000);

  it('REST run listing pages with limit and cursor; bad values are 400 naming the parameter; unknown run 404', async () => {
    const page1 = await rest(url, 'GET', '/optimization/quantum/runs?limit=1');
    expect(page1.status).toBe(200);
    expect(page1.body['runs']).toHaveLength(1);
    expect(page1.body['total']).toBeGreaterThanOrEqual(2);
    const page2 = await rest(url, 'GET', `/optimization/quantum/runs?limit=1&cursor=${page1.body['next_cursor']}`);
    expect(page2.body['runs'][0].id).not.toBe(page1.body['runs'][0].id);
    // Newest first by record number: pages of one are the first two of a page of two. (created_at is the
    // clock when a run was asked for, and runs started at once may be recorded in another order.)
    const both = await rest(url, 'GET', '/optimization/quantum/runs?limit=2');
    expect(both.body['runs'].map((r: { id: string }) => r.id)).toEqual([page1.body['runs'][0].id, page2.body['runs'][0].id]);
    for (const [query, field] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=abc', 'limit'],
      ['cursor=nope', 'cursor'],
    ] as const) {
      const r = await rest(url, 'GET', `/optimization/quantum/runs?${query}`);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field }] });
    }
    expect((await rest(url, 'GET', '/optimization/quantum/runs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const malformed = await rest(url, 'GET', '/optimization/quantum/runs/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ errors: [{ field: 'run_id' }] });
  });

  it('verify: threshold, violations, proof and the agreeing plain check; overview in one payload', async () => {
    const v = await rest(url, 'GET', '/optimization/verify?min_separation_m=300');
    expect(v.status).toBe(200);
    expect(v.body).toMatchObject({ min_separation_meters: 300, vessel_count: 24, pairs: 276, solver: { name: 'z3' }, cross_check: { agrees: true } });
    expect(v.body['status']).toBe(v.body['safe'] ? 'proved_safe' : 'violations_found');
    expect(v.body['proof']).toMatch(v.body['safe'] ? /^unsat/ : /^sat/);
    for (const x of v.body['separation_violations']) expect(x.distance_meters).toBeLessThan(300);
    expect(v.body['cross_check']['separation_violations']).toBe(v.body['separation_violations'].length);
    const bad = await rest(url, 'GET', '/optimization/verify?min_separation_m=10');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'min_separation_m' }] });
    const overview = await rest(url, 'GET', '/optimization/overview');
    expect(overview.status).toBe(200);
    expect(Object.keys(overview.body).sort()).toEqual(['fleet', 'quantum', 'status', 'verify']);
    expect(overview.body['verify']['cross_check']['agrees']).toBe(true);
    expect(overview.body['quantum']['runs'].length).toBeGreaterThan(0);
    expect(overview.body['quantum']['latest_refined']['refined_ratio']).toBeGreaterThan(0);
  }, 60_000);

  it('streams quantumRunCompleted and vesselPositionsChanged through the outbox', async () => {
    const c = wsClient(url);
    try {
      const cursor = (await gql(url, '{ optimizationEventCursor }')).data!['optimizationEventCursor'];
      const runs = new Collector<{ quantumRunCompleted: { status: string; run: { id: string; result: { optimalityRatio: number } } } }>(
        c.client,
        'subscription($after: ID) { quantumRunCompleted(after: $after) { cursor status run { id result { optimalityRatio } } } }',
        { after: cursor },
      );
      const started = await startRun(url, { problem: 'REGULAR3_MAXCUT', size: 8, depth: 1 });
      const id = started.data!['startQuantumRun'].id;
      await runs.until((r) => r.data.some((d) => d.quantumRunCompleted.run.id === id), 30_000);
      const event = runs.data.find((d) => d.quantumRunCompleted.run.id === id)!.quantumRunCompleted;
      expect(event.status).toBe('COMPLETED');
      expect(event.run.result.optimalityRatio).toBeGreaterThanOrEqual(0.6924);

      const fleet = (await rest(url, 'GET', '/optimization/fleet')).body;
      const mmsi = fleet['vessels'][3].mmsi;
      const ticks = new Collector<{ vesselPositionsChanged: { tick: number; positions: { tick: number }[]; vessels: { mmsi: string }[] } }>(
        c.client,
        'subscription($m: [ID!]) { vesselPositionsChanged(mmsis: $m) { tick positions { tick position { latitude } } vessels { mmsi } } }',
        { m: [mmsi] },
      );
      await ticks.count(2);
      const [a, b] = ticks.data.map((d) => d.vesselPositionsChanged);
      expect(b!.tick).toBeGreaterThan(a!.tick);
      expect(a!.positions).toHaveLength(1);
      expect(a!.vessels).toEqual([{ mmsi }]);
    } finally {
      await c.dispose();
    }
  }, 60_000);
});

describe('distributed mode: the optimization subgraph down', () => {
  let gateway: { url: string };
  let sub: RunningSubgraphServer;
  beforeAll(async () => {
    const target = await startTarget('pglite', 'distributed', { FLEET_TICK_MS: '1000' });
    gateway = target;
    sub = target.sub!;
  }, 180_000);

  it('REST answers 502 with a JSON error; GraphQL nulls only its fields (UPSTREAM_UNAVAILABLE), the rest stands', async () => {
    const server = gateway;
    expect((await rest(server.url, 'GET', '/optimization/fleet')).status).toBe(200);
    await sub.close();
    for (const path of ['/optimization/health', '/optimization/fleet', '/optimization/verify', '/optimization/quantum/runs', '/optimization/overview']) {
      const r = await rest(server.url, 'GET', path);
      expect(r.status).toBe(502);
      expect(r.headers.get('content-type')).toContain('json');
      expect(r.body).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE', detail: expect.any(String) });
      expect(r.body['detail'].length).toBeGreaterThan(0);
    }
    const q = await gql(server.url, '{ vesselFleet { tick } fleetSummary { total } }');
    expect(q.data).toEqual({ vesselFleet: null, fleetSummary: { total: 15 } });
    expect(q.errors).toHaveLength(1);
    expect(q.errors![0]).toMatchObject({ path: ['vesselFleet'], extensions: { code: 'UPSTREAM_UNAVAILABLE' } });
    const m = await startRun(server.url, { problem: 'REGULAR3_MAXCUT', size: 8 });
    expect(m.errors![0]!.extensions!['code']).toBe('UPSTREAM_UNAVAILABLE');
    // /health answers from a round of checks at most 250 ms old.
    await until(async () => (await rest(server.url, 'GET', '/health')).status === 503, 'health to report optimization down');
    const health = await rest(server.url, 'GET', '/health');
    expect(health.body).toMatchObject({ status: 'degraded', subgraphs: { optimization: { ready: false }, rental: { ready: true } } });
  });
});
