import { createConnection } from 'node:net';
import { randomBytes } from 'node:crypto';
import { execute, parse } from 'graphql';
import { createClient } from 'redis';
import { beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startFeaturesServer } from '../../support/features.js';
import { backends, setups } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { SYSTEM_PRINCIPAL } from '../../../platform/principal.js';

// A label-set frame's size is unknown until it runs, so the gateway assumes its documented maximum, 100,000 rows
// (cost about 100,200): a test that asks for one over GraphQL raises GRAPHQL_MAX_COST (docs/features.md).
const ENV = { FEATURES_SEED: '77', FEATURES_POLICIES: '200', GRAPHQL_MAX_COST: '200000' };

const PIT = `query($input: PitTrainingInput!) { pitTraining(input: $input) {
  engine rowCount columns { name view feature type } rows { policyId claimId eventTimestamp label values }
  matches { view matched unmatched } runs { engine milliseconds } comparison { cellsCompared mismatches examples } } }`;

describe.each(setups)('features GraphQL ($name)', ({ backend, mode }) => {
  let url: string;
  let server: Awaited<ReturnType<typeof startFeaturesServer>>;
  beforeAll(async () => {
    server = await startFeaturesServer({ backend, mode, env: ENV });
    url = server.url;
  }, 120_000);

  it('pitTraining runs both engines over a label set and reports their comparison and timings', async () => {
    const res = await gql(url, PIT, { input: { labelSet: 'UNDERWRITING', engine: 'BOTH', views: ['policy_profile', 'policy_claims_history'], limit: 300 } });
    expect(res.errors).toBeUndefined();
    const f = res.data!['pitTraining'];
    expect(f.engine).toBe('BOTH');
    expect(f.rowCount).toBe(300);
    expect(f.rows).toHaveLength(300);
    expect(f.comparison).toEqual({ cellsCompared: 600, mismatches: 0, examples: [] });
    expect(f.runs.map((r: { engine: string }) => r.engine)).toEqual(['DUCKDB', 'TYPESCRIPT']);
    expect(f.columns[0]).toEqual({ name: 'policy_profile__driver_age', view: 'policy_profile', feature: 'driver_age', type: 'INT' });
    expect(f.rows[0].values).toHaveLength(f.columns.length);
    // Label rows come back in time order with their labels, every one of them (matched or not).
    const times = f.rows.map((r: { eventTimestamp: string }) => Date.parse(r.eventTimestamp));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(f.rows.every((r: { label: number }) => r.label === 0 || r.label === 1)).toBe(true);
    expect(f.matches[0].matched + f.matches[0].unmatched).toBe(300);
  });

  it('input errors are BAD_USER_INPUT naming the field; a missing zone fails at the gateway', async () => {
    const bad = await gql(url, PIT, { input: { entities: [{ policyId: 'P-000001', eventTimestamp: '2024-01-01T00:00:00Z' }], ttl: 'soon' } });
    expect(bad.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'ttl' }] });
    const zone = await gql(url, PIT, { input: { entities: [{ policyId: 'P-000001', eventTimestamp: '2024-01-01T00:00:00' }] } });
    expect(zone.status).toBe(400);
    expect(zone.errors![0]!.extensions!['code']).toBe('BAD_USER_INPUT');
    const unknown = await gql(url, `{ policy(id: "P-999999") { id } claim(id: "C-000001") { id } }`);
    expect(unknown.data).toEqual({ policy: null, claim: { id: 'C-000001' } });
  });

  it('materialize and read back through Policy.online and onlineClaimFeatures; materializations lists it', async () => {
    const m = await gql(
      url,
      `mutation { materialize(input: { asOf: "2025-01-01T00:00:00Z", views: ["policy_profile", "claim_report"], engine: TYPESCRIPT }) { id rowsWritten watermark onlineStore views { view rowsWritten } } }`,
    );
    expect(m.errors).toBeUndefined();
    const id = m.data!['materialize'].id;
    const q = await gql(
      url,
      `{ policy(id: "P-000005") { id features(asOf: "2025-01-01T00:00:00Z") { column value } online { entity views { view materializationId asOf } values { column value } } }
      materializations(first: 1) { id rowsWritten } }`,
    );
    expect(q.errors).toBeUndefined();
    const p = q.data!['policy'];
    expect(p.online.entity).toBe('POLICY');
    expect(p.online.views).toEqual([{ view: 'policy_profile', materializationId: id, asOf: '2025-01-01T00:00:00.000Z' }]);
    // Online values are the point-in-time values at asOf (same join offline and online).
    expect(p.online.values).toEqual(p.features.filter((f: { column: string }) => f.column.startsWith('policy_profile__')));
    expect(q.data!['materializations']).toEqual([{ id, rowsWritten: m.data!['materialize'].rowsWritten }]);
  });

  it('resolves Policy and Claim entities from their keys (_entities)', async () => {
    const instance = mode === 'distributed' ? server.remote!.runtime.instances.get('features')! : server.gateway.subgraphs.get('features')!;
    const result = await execute({
      schema: instance.schema,
      document: parse(`query($r: [_Any!]!) { _entities(representations: $r) {
        ... on Policy { id features(asOf: "2021-01-01T00:00:00Z") { value } }
        ... on Claim { id features(asOf: "2030-01-01T00:00:00Z") { column value } } } }`),
      variableValues: {
        r: [
          { __typename: 'Policy', id: 'P-000001' },
          { __typename: 'Claim', id: 'C-000002' },
        ],
      },
      contextValue: instance.context({ headers: {}, principal: SYSTEM_PRINCIPAL }),
    });
    expect(result.errors).toBeUndefined();
    const [policy, claim] = (result.data as { _entities: { id: string; features: { column?: string; value: number | null }[] }[] })._entities;
    expect(policy!.id).toBe('P-000001');
    // Before the world began: the policy exists, its features do not yet.
    expect(policy!.features.every((f) => f.value === null)).toBe(true);
    expect(claim!.features.find((f) => f.column === 'claim_report__reported_amount')!.value).toBeGreaterThan(0);
  });

  // The machine view reads the rental events in the outbox: it needs the rental subgraph's database.
  const sharesOutbox = mode === 'one-process' || backend === 'postgres';
  it.runIf(sharesOutbox)('Machine gains point-in-time utilization features from the rental events (an entity join)', async () => {
    const before = new Date().toISOString();
    const quote = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-002'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(30),
      duration_hours: 4,
    });
    expect(quote.status).toBe(200);
    const after = new Date(Date.now() + 1000).toISOString();
    const q = `query($a: DateTime, $b: DateTime) { machine(id: "EQ-002") { status then: utilizationFeatures(asOf: $a) { column value } now: utilizationFeatures(asOf: $b) { column value } } }`;
    const res = await gql(url, q, { a: before, b: after });
    expect(res.errors).toBeUndefined();
    const m = res.data!['machine'];
    expect(m.status).toBe('RESERVED');
    const value = (list: { column: string; value: number | null }[], c: string) => list.find((f) => f.column === `machine_utilization__${c}`)!.value;
    expect(value(m.now, 'status_code')).toBe(1);
    expect(value(m.now, 'busy')).toBe(1);
    expect(value(m.now, 'fleet_utilization')).toBeCloseTo(quote.body['utilization'], 4);
    // Before the quote this machine had no event: nothing to report, rather than today's state.
    expect(value(m.then, 'busy')).toBeNull();
  });
});

describe.each(backends)('distributed mode: the features subgraph down (%s)', (backend) => {
  it('answers UPSTREAM_UNAVAILABLE on its fields, 502 on its REST paths, degraded health; the rest still serves', async () => {
    const server = await startFeaturesServer({ backend, mode: 'distributed', env: { ...ENV, SUBGRAPH_TIMEOUT_MS: '2000' } });
    await server.remote!.close();
    const res = await gql(server.url, `{ fleetSummary { total } featureView(name: "policy_profile") { name } }`);
    expect(res.data).toEqual({ fleetSummary: { total: 15 }, featureView: null });
    expect(res.errors![0]).toMatchObject({ path: ['featureView'], extensions: { code: 'UPSTREAM_UNAVAILABLE' } });
    const restCall = await rest(server.url, 'POST', '/features/pit-training', {
      entities: [{ policy_id: 'P-000001', event_timestamp: '2024-01-01T00:00:00Z' }],
    });
    expect(restCall.status).toBe(502);
    expect(restCall.body).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
    // /health answers from a round of checks at most 250 ms old.
    await until(async () => (await rest(server.url, 'GET', '/health')).status === 503, 'health to report features down');
    const health = await rest(server.url, 'GET', '/health');
    expect(health.body).toMatchObject({ status: 'degraded', subgraphs: { features: { ready: false } } });
  }, 120_000);
});

/** Redis on 127.0.0.1:6379 answers? The Redis suite runs only then, and says so otherwise. */
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const redisUp = await new Promise<boolean>((resolve) => {
  const u = new URL(REDIS_URL);
  const socket = createConnection({ host: u.hostname, port: Number(u.port || 6379) });
  socket.setTimeout(500);
  socket.once('connect', () => (socket.end(), resolve(true)));
  socket.once('error', () => resolve(false));
  socket.once('timeout', () => (socket.destroy(), resolve(false)));
});
if (!redisUp) console.log(`features online store on Redis: skipped, nothing answers at ${REDIS_URL}`);

describe.runIf(redisUp)('the online store on Redis (REDIS_URL)', () => {
  const prefix = `test-features-${randomBytes(4).toString('hex')}`;
  let url: string;
  const client = createClient({ url: REDIS_URL });
  beforeAll(async () => {
    await client.connect();
    ({ url } = await startFeaturesServer({ backend: 'pglite', mode: 'one-process', env: { ...ENV, REDIS_URL, FEATURES_REDIS_PREFIX: prefix } }));
    return async () => {
      const keys = await client.keys(`${prefix}:*`);
      if (keys.length > 0) await client.del(keys);
      await client.close();
    };
  }, 120_000);

  it('serves materialized values from Redis, swaps a new materialization in whole and drops the old one', async () => {
    expect((await rest(url, 'GET', '/features/health')).body).toMatchObject({ online_store: 'redis', checks: { online_store: { ok: true, detail: 'redis' } } });
    expect((await rest(url, 'GET', '/features/online/policy/P-000003')).status).toBe(404);
    const first = await rest(url, 'POST', '/features/offline', { as_of: '2024-01-01T00:00:00Z', views: ['policy_profile'] });
    expect(first.status).toBe(200);
    expect(first.body['online_store']).toBe('redis');
    const pit = await rest(url, 'POST', '/features/pit-training', {
      entities: [{ policy_id: 'P-000003', event_timestamp: '2024-01-01T00:00:00Z' }],
      views: ['policy_profile'],
    });
    const online = await rest(url, 'GET', '/features/online/policy/P-000003');
    expect(online.status).toBe(200);
    expect(online.body['views'][0]).toMatchObject({ view: 'policy_profile', materialization_id: first.body['materialization_id'] });
    const { policy_id: _p, event_timestamp: _e, ...values } = pit.body['rows'][0];
    expect(online.body['features']).toEqual(values);
    const hashes = await client.keys(`${prefix}:v:policy_profile:*`);
    expect(hashes).toHaveLength(1);
    expect(await client.hLen(hashes[0]!)).toBe(first.body['rows_written']);
    // Made current by the swap: no longer on the lease that expires a dead materialization's hashes.
    expect(await client.pTTL(hashes[0]!)).toBe(-1);

    const second = await rest(url, 'POST', '/features/offline', { as_of: '2025-06-01T00:00:00Z', views: ['policy_profile'] });
    const again = await rest(url, 'GET', '/features/online/policy/P-000003');
    expect(again.body['views'][0].materialization_id).toBe(second.body['materialization_id']);
    const after = await client.keys(`${prefix}:v:policy_profile:*`);
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(hashes[0]);
  });

  it('a second instance sharing the Redis store serves each new materialization at once (its pointers are re-read when stale)', async () => {
    // Its own database (PGlite): no outbox event reaches it, so only Redis itself can tell it what changed.
    const other = await startFeaturesServer({ backend: 'pglite', mode: 'one-process', env: { ...ENV, REDIS_URL, FEATURES_REDIS_PREFIX: prefix } });
    try {
      const before = await rest(other.url, 'GET', '/features/online/policy/P-000003');
      expect(before.status).toBe(200);
      // Forward in time: the online store refuses to go back (409).
      for (const as_of of ['2025-07-01T00:00:00Z', '2025-09-01T00:00:00Z']) {
        const made = await rest(url, 'POST', '/features/offline', { as_of, views: ['policy_profile'] });
        expect(made.status).toBe(200);
        const seen = await rest(other.url, 'GET', '/features/online/policy/P-000003');
        expect(seen.status).toBe(200);
        expect(seen.body['views'][0]).toMatchObject({ materialization_id: made.body['materialization_id'], as_of: new Date(as_of).toISOString() });
        expect(seen.body['features']).toEqual((await rest(url, 'GET', '/features/online/policy/P-000003')).body['features']);
      }
    } finally {
      await other.close();
    }
  });
});
