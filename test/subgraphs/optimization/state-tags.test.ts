import { randomBytes } from 'node:crypto';
import { execute, parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import { systemClock } from '../../../platform/clock.js';
import type { Principal } from '../../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../../platform/runtime.js';
import { stateExtension, StateTrace, traceRequest, traceStateAccess, type StateExtension } from '../../../platform/state-trace.js';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { optimization } from '../../../subgraphs/optimization/index.js';
import type { JobResult } from '../../../subgraphs/optimization/job.js';
import { OptimizationStore, type NewRun } from '../../../subgraphs/optimization/store.js';
import { backends, dropSchema, TEST_DATABASE_URL } from '../../support/server.js';
import { until, waitFor } from '../../support/wait.js';

/*
 * What the optimization subgraph's answers say they depend on, and what its writes say they changed
 * (platform/state-trace.ts): every write path's event carries the collection, key and owner tags of what
 * it wrote; a by-id read depends on its keys, a tenant's list on its owner tag, an operator's on the
 * collection; what reads the event log or checks health now is not kept.
 */

const reader = (id: string, tenant: string): Principal => ({ id, tenant, scopes: ['optimization:read', 'optimization:run'] });
const ALICE = reader('alice', 'tenant-a');
const BOB = reader('bob', 'tenant-b');
const OPERATOR: Principal = { id: 'operator-1', tenant: 'operators', scopes: ['ops:admin'] };

const SMALL_RUN = { problem: 'REGULAR3_MAXCUT', size: 4, depth: 1, shots: 64, maxEvaluations: 5 };

interface Answer {
  data: Record<string, unknown> | null | undefined;
  errors: readonly unknown[] | undefined;
  state: StateExtension | null;
}

interface StoredEvent {
  id: string;
  topic: string;
  key: string | null;
  payload: Record<string, unknown>;
  audience: unknown;
  tags: string[];
}

describe.each(backends)('optimization state (%s)', (backend) => {
  let runtime: SubgraphRuntime;
  let instance: SubgraphInstance;
  const schema = `t_state_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    const database = backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema } : {};
    runtime = await startSubgraphRuntime({
      config: loadConfig({ DATA_DIR: ':memory:', LOG_LEVEL: 'silent', FLEET_TICK_MS: '300', OPTIMIZATION_MAX_CONCURRENT_RUNS: '8', ...database }),
      clock: systemClock,
      modules: [optimization],
    });
    instance = runtime.instances.get('optimization')!;
  }, 120_000);
  afterAll(async () => {
    await runtime?.close();
    if (backend === 'postgres') await dropSchema(schema);
  });

  /** One subgraph request as `principal`, traced as the gateway traces it: its answer and `extensions.state`. */
  async function ask(principal: Principal, query: string, variables: Record<string, unknown> = {}): Promise<Answer> {
    const trace = new StateTrace();
    const result = await traceRequest(trace, async () =>
      execute({ schema: instance.schema, document: parse(query), variableValues: variables, contextValue: instance.context({ headers: {}, principal }) }),
    );
    return { data: result.data, errors: result.errors, state: stateExtension(trace) };
  }

  async function events(where: string, params: unknown[] = []): Promise<StoredEvent[]> {
    const res = await runtime.db.query<StoredEvent>(
      `SELECT id::text AS id, topic, key, payload, audience, tags FROM outbox WHERE ${where} ORDER BY id`,
      params,
    );
    return res.rows;
  }

  const newestTick = async () => (await events(`topic = 'optimization.positions'`)).at(-1)!;

  const sorted = (tags: Iterable<string> | undefined) => [...(tags ?? [])].sort();
  const intersects = (a: Iterable<string> | undefined, b: Iterable<string> | undefined) => {
    const set = new Set(a ?? []);
    return [...(b ?? [])].some((t) => set.has(t));
  };

  async function startRun(principal: Principal): Promise<{ id: string; answer: Answer }> {
    const answer = await ask(principal, 'mutation ($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id status } }', { i: SMALL_RUN });
    expect(answer.errors).toBeUndefined();
    return { id: (answer.data!['startQuantumRun'] as { id: string }).id, answer };
  }

  const runEnded = (id: string) =>
    waitFor(async () => (await events(`topic = 'optimization.run' AND key = $1`, [id]))[0], `run ${id} to end`, { timeoutMs: 60_000 });

  describe('optimization writes: each event carries what it changed', () => {
    it('seeding the fleet and every tick: the clock, the vessels collection and every vessel', async () => {
      const vessels = (await runtime.db.query<{ mmsi: string }>('SELECT mmsi FROM optimization_vessels ORDER BY mmsi')).rows.map((r) => r.mmsi);
      expect(vessels).toHaveLength(24);
      const expected = sorted(['Fleet', 'Fleet:1', 'Vessel', ...vessels.map((m) => `Vessel:${m}`)]);
      const seeded = await events(`topic = 'optimization.positions' AND (payload->>'tick')::int = 0`);
      expect(seeded).toHaveLength(1);
      expect(seeded[0]!.audience).toBe('everyone');
      expect(sorted(seeded[0]!.tags)).toEqual(expected);
      const tick = await waitFor(async () => (await events(`topic = 'optimization.positions' AND (payload->>'tick')::int >= 1`))[0], 'a fleet tick');
      expect(tick.audience).toBe('everyone');
      expect(sorted(tick.tags)).toEqual(expected);
    });

    it('starting a run: a state event of its tenant, tagged with the runs, the run and the tenant; its end likewise', async () => {
      const { id, answer } = await startRun(ALICE);
      const tags = sorted(['QuantumRun', `QuantumRun:${id}`, 'QuantumRun@tenant-a']);
      // The mutation's answer says what it changed and where in the log (read-your-writes).
      expect(sorted(answer.state?.changed)).toEqual(tags);
      expect(answer.state?.position).toMatch(/^\d+$/);
      const [started] = await events(`topic = 'optimization.state' AND key = $1`, [id]);
      expect(started).toMatchObject({ payload: { runId: id }, audience: { owner: { tenant: 'tenant-a', principal: 'alice' }, grain: 'tenant' } });
      expect(sorted(started!.tags)).toEqual(tags);
      expect(answer.state?.position).toBe(started!.id);
      const ended = await runEnded(id);
      expect(ended.payload['status']).toBe('completed');
      expect(sorted(ended.tags)).toEqual(tags);
    });

    it('the store: a run failed, completed, failed at start or on an expired lease carries its tags; a write that finds nothing to change appends nothing and is no error', async () => {
      // The store on the database as the subgraph is given it: a write without its event is refused.
      const db = traceStateAccess(runtime.db, optimization.state!, 'optimization_', runtime.identity);
      const options = { seed: 7, size: 24, tickMs: 300, leaseMs: 60_000, owner: 'state-tags-test', onEvents: () => undefined };
      // Opened before any run is inserted: embedded, opening a store fails every run left running.
      const store = await OptimizationStore.open(db, options, new Date());
      const shortLease = await OptimizationStore.open(db, { ...options, owner: 'a-dead-process', leaseMs: 1 }, new Date());
      const sweeper = await OptimizationStore.open(db, { ...options, owner: 'another-process' }, new Date());
      const run: NewRun = {
        problem: 'REGULAR3_MAXCUT',
        size: 4,
        qubits: 4,
        depth: 1,
        shots: 64,
        seed: 1,
        maxEvaluations: 5,
        refineTop: 1,
        fleetTick: null,
        instance: { description: 'test', variables: [], edges: [] },
        backend: 'statevector-simulator',
      };
      const insert = async (tenant: string, by = store) => {
        const made = await by.insertRun(run, { tenant, principal: `${tenant}-p` }, { global: 64, tenant: null }, new Date());
        if ('full' in made) throw new Error('no slot');
        return made.id;
      };
      const tagsOf = (id: string, tenant: string) => sorted(['QuantumRun', `QuantumRun:${id}`, `QuantumRun@${tenant}`]);
      const endOf = async (id: string) =>
        (await events(`topic = 'optimization.run' AND key = $1`, [id])).map((e) => ({ status: e.payload['status'], tags: sorted(e.tags) }));

      const failed = await insert('tenant-c');
      expect(await store.failRun(failed, 'boom', 5, new Date())).toBe(true);
      expect(await endOf(failed)).toEqual([{ status: 'failed', tags: tagsOf(failed, 'tenant-c') }]);
      // Not running any more: nothing to change, no event, no refusal.
      expect(await store.failRun(failed, 'again', 5, new Date())).toBe(false);
      expect(await store.completeRun(failed, {} as JobResult, new Date())).toBe(false);
      expect(await endOf(failed)).toHaveLength(1);

      // Its lease (1 ms) has expired: another process's sweep fails it (on PostgreSQL, the subgraph's own may be first).
      const expired = await insert('tenant-d', shortLease);
      await until(async () => {
        await sweeper.renewAndSweep();
        return (await endOf(expired)).length > 0;
      }, 'the expired lease to be swept');
      expect(await endOf(expired)).toEqual([{ status: 'failed', tags: tagsOf(expired, 'tenant-d') }]);
      // A sweep that finds no lease expired writes nothing.
      expect(await sweeper.renewAndSweep()).toEqual([]);

      const left = await insert('tenant-e');
      const failedAtStart = await store.failRunsLeftRunning();
      expect(failedAtStart).toContain(left);
      expect(await endOf(left)).toEqual([{ status: 'failed', tags: tagsOf(left, 'tenant-e') }]);
      expect(await store.failRunsLeftRunning()).toEqual([]);

      // A tick another instance has recorded already (its interval has not passed): nothing written, no refusal.
      expect(await store.tick(new Date(0))).toBeNull();
    });
  });

  describe('optimization reads: what each answer depends on', () => {
    let aliceRun: string;
    let bobRun: string;
    beforeAll(async () => {
      aliceRun = (await startRun(ALICE)).id;
      bobRun = (await startRun(BOB)).id;
      await Promise.all([runEnded(aliceRun), runEnded(bobRun)]);
    }, 120_000);

    it('a run by id depends on that run alone: another run written leaves it, the run itself written drops it', async () => {
      const read = await ask(ALICE, 'query ($id: ID!) { quantumRun(id: $id) { id status } }', { id: aliceRun });
      expect(read.data!['quantumRun']).toEqual({ id: aliceRun, status: 'COMPLETED' });
      expect(read.state).toEqual({ tags: [`QuantumRun:${aliceRun}`], grain: 'tenant', lineage: runtime.identity });
      // Another tenant's run, found or not, is a key too: what the answer would change with.
      const hidden = await ask(ALICE, 'query ($id: ID!) { quantumRun(id: $id) { id } }', { id: bobRun });
      expect(hidden.data!['quantumRun']).toBeNull();
      expect(hidden.state?.tags).toEqual([`QuantumRun:${bobRun}`]);
      // An operator sees it: that answer is the operator's alone.
      const operators = await ask(OPERATOR, 'query ($id: ID!) { quantumRun(id: $id) { id } }', { id: bobRun });
      expect(operators.data!['quantumRun']).toEqual({ id: bobRun });
      expect(operators.state).toEqual({ tags: [`QuantumRun:${bobRun}`], grain: 'principal', lineage: runtime.identity });

      const other = await startRun(ALICE);
      expect(intersects(read.state?.tags, other.answer.state?.changed)).toBe(false);
      expect(intersects(read.state?.tags, (await runEnded(other.id)).tags)).toBe(false);
      const ownWrites = await events(`key = $1 AND topic LIKE 'optimization.%'`, [aliceRun]);
      expect(ownWrites.map((e) => e.topic)).toEqual(['optimization.state', 'optimization.run']);
      for (const e of ownWrites) expect(intersects(read.state?.tags, e.tags)).toBe(true);
    });

    it("a tenant's lists depend on its owner tag, an operator's on the collection", async () => {
      const list = await ask(ALICE, '{ quantumRuns(first: 5) { totalCount edges { node { id } } } latestRefinedResult { run { id } } }');
      expect(list.errors).toBeUndefined();
      // The resolvers read the caller: the answer is the principal's.
      expect(list.state).toEqual({ tags: ['QuantumRun@tenant-a'], grain: 'principal', lineage: runtime.identity });
      const bobs = (await events(`topic = 'optimization.state' AND key = $1`, [bobRun]))[0]!;
      expect(intersects(list.state?.tags, bobs.tags)).toBe(false);
      const alices = (await events(`topic = 'optimization.state' AND key = $1`, [aliceRun]))[0]!;
      expect(intersects(list.state?.tags, alices.tags)).toBe(true);

      const all = await ask(OPERATOR, '{ quantumRuns(first: 5) { totalCount } optimizationStatus { runs { total } } }');
      expect(sorted(all.state?.tags)).toEqual(['Fleet', 'QuantumRun']);
      expect(intersects(all.state?.tags, bobs.tags)).toBe(true);

      const status = await ask(BOB, '{ optimizationStatus { runs { total } fleet { tick } } }');
      expect(sorted(status.state?.tags)).toEqual(['Fleet', 'QuantumRun@tenant-b']);
    });

    it('a vessel depends on its key, the fleet on its collections; ticks drop both', async () => {
      const mmsi = (await runtime.db.query<{ mmsi: string }>('SELECT mmsi FROM optimization_vessels ORDER BY mmsi LIMIT 1')).rows[0]!.mmsi;
      const vessel = await ask(ALICE, 'query ($m: ID!) { vessel(mmsi: $m) { name track(last: 2) { tick } } }', { m: mmsi });
      expect(vessel.errors).toBeUndefined();
      expect(vessel.state).toEqual({ tags: [`Vessel:${mmsi}`], grain: 'everyone', lineage: runtime.identity });
      const fleet = await ask(ALICE, '{ vesselFleet { tick vessels { mmsi } } }');
      expect(sorted(fleet.state?.tags)).toEqual(['Fleet', 'Vessel']);
      expect(fleet.state?.grain).toBe('everyone');
      const tick = await newestTick();
      expect(intersects(vessel.state?.tags, tick.tags)).toBe(true);
      expect(intersects(fleet.state?.tags, tick.tags)).toBe(true);
      // A run's write leaves the fleet's answers.
      const run = (await events(`topic = 'optimization.state' AND key = $1`, [aliceRun]))[0]!;
      expect(intersects(vessel.state?.tags, run.tags)).toBe(false);
      expect(intersects(fleet.state?.tags, run.tags)).toBe(false);
      // No read moves with the clock.
      expect(vessel.state?.validUntil).toBeUndefined();
      expect(fleet.state?.validUntil).toBeUndefined();
    });

    it('the event cursor (the log) and health (a check made now) are not kept', async () => {
      const cursor = await ask(ALICE, '{ optimizationEventCursor }');
      expect(cursor.state?.uncacheable).toMatch(/outbox/);
      const health = await ask(ALICE, '{ optimizationHealth { ready fleetTick } }');
      expect(health.data!['optimizationHealth']).toMatchObject({ ready: true });
      expect(health.state?.uncacheable).toMatch(/health/);
    });
  });
});
