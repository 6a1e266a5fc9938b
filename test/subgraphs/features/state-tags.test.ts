import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { execute, parse } from 'graphql';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import type { Clock } from '../../../platform/clock.js';
import type { Principal } from '../../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../../platform/runtime.js';
import { stateExtension, StateTrace, traceRequest, type StateExtension } from '../../../platform/state-trace.js';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { features } from '../../../subgraphs/features/index.js';
import { backends, dropSchema, TEST_DATABASE_URL } from '../../support/server.js';
import { freePort } from '../../support/port.js';
import { until } from '../../support/wait.js';

/*
 * What the features subgraph's answers say they depend on, and what its writes say they changed
 * (platform/state-trace.ts): a materialization's event names the materializations, itself and the online
 * rows of its views; an online read (from memory or Redis) depends on the online rows of its entity's
 * views; the materializations list on the collection; the feature views on the rental machines (the
 * machine view's rows); point-in-time features at the request's now hold until one of the entity's rows
 * becomes available or leaves its TTL; health, measured times and what reads the event log are not kept.
 */

const READER: Principal = { id: 'analyst', tenant: 'tenant-a', scopes: ['features:read', 'features:materialize'] };
/** The request's now: inside the generated world (2022..2026), where an entity's answer moves with time. */
const NOW = Date.UTC(2024, 5, 1);
const clock: Clock = { now: () => new Date(NOW) };
const POLICY = 'P-000003';
const POLICY_ONLINE = ['OnlineFeatures:policy_claims_history', 'OnlineFeatures:policy_profile'];

interface Answer {
  data: Record<string, unknown> | null | undefined;
  errors: readonly unknown[] | undefined;
  state: StateExtension | null;
  /** What the code said while answering (the extension reports a bound only beside tags). */
  trace: StateTrace;
}

const sorted = (tags: Iterable<string> | undefined) => [...(tags ?? [])].sort();
const intersects = (a: Iterable<string> | undefined, b: Iterable<string> | undefined) => {
  const set = new Set(a ?? []);
  return [...(b ?? [])].some((t) => set.has(t));
};

const hasRedis = await new Promise<boolean>((resolve) => {
  const p = spawn('redis-server', ['--version']);
  p.on('error', () => resolve(false));
  p.on('exit', (code) => resolve(code === 0));
});
if (!hasRedis) console.warn('[features state-tags] no redis-server on PATH: the Redis online store is skipped');

/** A redis-server on `port` keeping nothing on disk. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const client = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
  client.on('error', () => undefined);
  await until(async () => {
    try {
      await client.connect();
      await client.ping();
      return true;
    } catch {
      return false;
    }
  }, 'redis-server to answer');
  await client.close();
  return child;
}

const stores = [
  ...backends.map((backend) => ({ name: `database online store, ${backend}`, backend, redis: false })),
  ...(hasRedis ? [{ name: 'Redis online store, pglite', backend: 'pglite' as const, redis: true }] : []),
];

describe.each(stores)('features state ($name)', ({ backend, redis }) => {
  let runtime: SubgraphRuntime;
  let instance: SubgraphInstance;
  let redisServer: ChildProcess | null = null;
  const schema = `t_state_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    const database = backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema } : {};
    let online = {};
    if (redis) {
      const port = await freePort();
      redisServer = await startRedis(port);
      online = { REDIS_URL: `redis://127.0.0.1:${port}` };
    }
    runtime = await startSubgraphRuntime({
      config: loadConfig({
        DATA_DIR: ':memory:',
        FEATURES_DATA_DIR: ':memory:',
        LOG_LEVEL: 'silent',
        FEATURES_SEED: '77',
        FEATURES_POLICIES: '200',
        ...database,
        ...online,
      }),
      clock,
      modules: [features],
    });
    instance = runtime.instances.get('features')!;
  }, 180_000);
  afterAll(async () => {
    await runtime?.close();
    if (redisServer && redisServer.exitCode === null) {
      const exited = new Promise((resolve) => redisServer!.once('exit', resolve));
      redisServer.kill('SIGKILL');
      await exited;
    }
    if (backend === 'postgres') await dropSchema(schema);
  });

  /** One subgraph request, traced as the gateway traces it: its answer and `extensions.state`. */
  async function ask(query: string, variables: Record<string, unknown> = {}): Promise<Answer> {
    const trace = new StateTrace();
    const result = await traceRequest(trace, async () =>
      execute({
        schema: instance.schema,
        document: parse(query),
        variableValues: variables,
        contextValue: instance.context({ headers: {}, principal: READER }),
      }),
    );
    return { data: result.data, errors: result.errors, state: stateExtension(trace), trace };
  }

  async function materialize(views: string[]): Promise<{ id: string; answer: Answer; event: { audience: unknown; tags: string[] } }> {
    const answer = await ask('mutation ($v: [String!]) { materialize(input: { views: $v }) { id } }', { v: views });
    expect(answer.errors).toBeUndefined();
    const id = (answer.data!['materialize'] as { id: string }).id;
    const res = await runtime.db.query<{ audience: unknown; tags: string[] }>(
      `SELECT audience, tags FROM outbox WHERE topic = 'features.materialized' AND payload->>'materializationId' = $1`,
      [id],
    );
    expect(res.rows).toHaveLength(1);
    return { id, answer, event: res.rows[0]! };
  }

  const onlinePolicy = () =>
    ask('query ($id: ID!) { onlinePolicyFeatures(id: $id) { id values { column value } views { view materializationId } } }', { id: POLICY });
  const entity = (typename: string, id: string, selection: string) =>
    ask(`query ($r: [_Any!]!) { _entities(representations: $r) { ... on ${typename} { ${selection} } } }`, { r: [{ __typename: typename, id }] });

  it("a materialization's event: the materializations, itself and the online rows of each view it replaced", async () => {
    const { id, answer, event } = await materialize(['policy_profile', 'policy_claims_history']);
    const expected = sorted(['FeatureMaterialization', `FeatureMaterialization:${id}`, 'OnlineFeatures', ...POLICY_ONLINE]);
    expect(event.audience).toBe('everyone');
    expect(sorted(event.tags)).toEqual(expected);
    expect(sorted(answer.state?.changed)).toEqual(expected);
  });

  it("an online read depends on its entity's views alone: another entity's materialization leaves it, its own drops it", async () => {
    // The first read may load the in-memory copy; the next is answered from it (or from Redis).
    await onlinePolicy();
    const read = await onlinePolicy();
    expect((read.data!['onlinePolicyFeatures'] as { id: string }).id).toBe(POLICY);
    // Answered from memory or Redis: no statement ran, so it names no database and a gateway does not keep
    // it (platform/state-trace.ts, lineage); its tags are what would drop it.
    expect({ ...read.state, tags: sorted(read.state?.tags) }).toEqual({ tags: POLICY_ONLINE, grain: 'everyone' });
    const through = await entity('Policy', POLICY, 'online { id }');
    expect(sorted(through.state?.tags)).toEqual(POLICY_ONLINE);

    const claims = await materialize(['claim_report']);
    expect(intersects(read.state?.tags, claims.event.tags)).toBe(false);
    const policies = await materialize(['policy_profile']);
    expect(intersects(read.state?.tags, policies.event.tags)).toBe(true);
    // And the new answer is the new materialization's.
    await onlinePolicy();
    const after = await onlinePolicy();
    const views = (after.data!['onlinePolicyFeatures'] as { views: { view: string; materializationId: string }[] }).views;
    expect(views.find((v) => v.view === 'policy_profile')?.materializationId).toBe(policies.id);
  });

  it('the materializations list depends on the collection; the feature views on the rental machines', async () => {
    const list = await ask('{ materializations(first: 5) { id } }');
    expect(list.state).toEqual({ tags: ['FeatureMaterialization'], grain: 'everyone', lineage: runtime.identity });
    const views = await ask('{ featureViews { name rowCount } }');
    // From memory: it names no database either.
    expect(views.state).toEqual({ tags: ['Machine'], grain: 'everyone' });
    // A view of the generated world never changes: its answer depends on no state.
    expect((await ask('{ featureView(name: "policy_profile") { rowCount } }')).state).toBeNull();
    expect((await ask('{ featureView(name: "machine_utilization") { rowCount } }')).state?.tags).toEqual(['Machine']);
  });

  it("point-in-time features at the request's now hold until one of the entity's rows changes them", async () => {
    const now = await entity('Policy', POLICY, 'features { column value }');
    expect(now.trace.clockRead).toBe(true);
    expect(now.trace.verdict()).toBeNull();
    const until = now.trace.validUntil;
    expect(until).toBeGreaterThan(NOW);
    expect(Number.isFinite(until)).toBe(true);
    const values = (now.data!['_entities'] as { features: unknown }[])[0]!.features;
    // Every instant up to the bound answers the same.
    for (let k = 1; k <= 20; k++) {
      const at = NOW + Math.floor(((until! - 1 - NOW) * k) / 20);
      const probe = await entity('Policy', POLICY, `features(asOf: "${new Date(at).toISOString()}") { column value }`);
      expect((probe.data!['_entities'] as { features: unknown }[])[0]!.features, new Date(at).toISOString()).toEqual(values);
      // Asked as of a time, the answer reads no clock and no state.
      expect(probe.trace.clockRead).toBe(false);
      expect(probe.state).toBeNull();
    }
    // An entity with no rows never changes: its answer holds until a write (it depends on none).
    const unknown = await entity('Policy', 'P-999999', 'features { value }');
    expect(unknown.trace.validUntil).toBe(Number.POSITIVE_INFINITY);
    expect(unknown.state).toBeNull();
    // The machine view is rebuilt from the rental events in the event log: not kept.
    expect((await entity('Machine', 'M-001', 'utilizationFeatures { value }')).state?.uncacheable).toMatch(/outbox/);
  });

  it('health and measured times are not kept; a frame without its run times is', async () => {
    expect((await ask('{ featureStoreHealth { ok } }')).state?.uncacheable).toMatch(/health/);
    const input = { entities: [{ policyId: POLICY, eventTimestamp: new Date(NOW).toISOString() }] };
    const timed = await ask('query ($i: PitTrainingInput!) { pitTraining(input: $i) { rowCount runs { milliseconds } } }', { i: input });
    expect(timed.errors).toBeUndefined();
    expect(timed.state?.uncacheable).toMatch(/run time/);
    const plain = await ask('query ($i: PitTrainingInput!) { pitTraining(input: $i) { rowCount rows { values } } }', { i: input });
    expect(plain.errors).toBeUndefined();
    expect(plain.state).toBeNull();
  });
});
