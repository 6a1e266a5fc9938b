import { randomBytes } from 'node:crypto';
import { execute, parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import { systemClock } from '../../../platform/clock.js';
import type { Principal } from '../../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../../platform/runtime.js';
import { stateExtension, StateTrace, traceRequest, traceStateAccess, type StateExtension } from '../../../platform/state-trace.js';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { bonding } from '../../../subgraphs/bonding/index.js';
import { BondingStore } from '../../../subgraphs/bonding/store.js';
import { backends, dropSchema, TEST_DATABASE_URL } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/*
 * What the bonding subgraph's answers say they depend on, and what its writes say they changed
 * (platform/state-trace.ts): a session's start, steps, keys and close carry the sessions', the session's and
 * its tenant's tags (a key also the key's); a session by id depends on its key, a user's sessions on the
 * tenant's owner tag, an operator's overview on the collection; the event cursor and measured times are not kept.
 */

const user = (id: string, tenant: string): Principal => ({ id, tenant, scopes: ['bonding:use'] });
const ALICE = user('alice', 'tenant-a');
const BOB = user('bob', 'tenant-b');
const OPERATOR: Principal = { id: 'operator-1', tenant: 'operators', scopes: ['ops:admin'] };

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

const sorted = (tags: Iterable<string> | undefined) => [...(tags ?? [])].sort();
const intersects = (a: Iterable<string> | undefined, b: Iterable<string> | undefined) => {
  const set = new Set(a ?? []);
  return [...(b ?? [])].some((t) => set.has(t));
};
const sessionTags = (id: string, tenant: string) => sorted(['BondingSession', `BondingSession:${id}`, `BondingSession@${tenant}`]);

describe.each(backends)('bonding state (%s)', (backend) => {
  let runtime: SubgraphRuntime;
  let instance: SubgraphInstance;
  const schema = `t_state_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    const database = backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema } : {};
    runtime = await startSubgraphRuntime({
      // A credential configured: not demo mode, where every caller acts for one sandbox user.
      config: loadConfig({ DATA_DIR: ':memory:', LOG_LEVEL: 'silent', BONDING_TICK_MS: '100', API_KEYS: 'state-tags-operator-key-01', ...database }),
      clock: systemClock,
      modules: [bonding],
    });
    instance = runtime.instances.get('bonding')!;
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
  const eventOf = (id: string, kind: string) =>
    waitFor(async () => (await events(`topic = 'bonding.session' AND key = $1 AND payload->>'kind' = $2`, [id, kind]))[0], `a ${kind} event of ${id}`);

  async function start(principal: Principal): Promise<{ id: string; answer: Answer }> {
    const answer = await ask(principal, 'mutation { startBondingSession(seed: 7) { id state } }');
    expect(answer.errors).toBeUndefined();
    return { id: (answer.data!['startBondingSession'] as { id: string }).id, answer };
  }

  describe('writes: each event carries what it changed', () => {
    it("a session's start, its link-model steps, a key and its close", async () => {
      const { id, answer } = await start(ALICE);
      expect(sorted(answer.state?.changed)).toEqual(sessionTags(id, 'tenant-a'));
      const started = await eventOf(id, 'started');
      expect(answer.state?.position).toBe(started.id);
      expect(started.audience).toEqual({ owner: { tenant: 'tenant-a', principal: 'alice' }, grain: 'principal' });
      expect(sorted(started.tags)).toEqual(sessionTags(id, 'tenant-a'));

      // The link model (a background writer) steps it.
      expect(sorted((await eventOf(id, 'metrics')).tags)).toEqual(sessionTags(id, 'tenant-a'));
      expect(sorted((await eventOf(id, 'state')).tags)).toEqual(sessionTags(id, 'tenant-a'));

      const key = await ask(ALICE, 'mutation ($s: ID!) { generateQuantumKey(input: { sessionId: $s, bits: 128, seed: 3 }) { status keyId } }', { s: id });
      expect(key.errors).toBeUndefined();
      const [generation] = (await runtime.db.query<{ id: string }>('SELECT id FROM bonding_keys WHERE session_id = $1', [id])).rows;
      const keyTags = sorted([...sessionTags(id, 'tenant-a'), 'BondingKey', `BondingKey:${generation!.id}`, 'BondingKey@tenant-a']);
      expect(sorted((await eventOf(id, 'key')).tags)).toEqual(keyTags);
      expect(sorted(key.state?.changed)).toEqual(keyTags);

      const closed = await ask(ALICE, 'mutation ($s: ID!) { closeBondingSession(id: $s) { state } }', { s: id });
      expect(closed.data!['closeBondingSession']).toEqual({ state: 'CLOSED' });
      expect(sorted((await eventOf(id, 'closed')).tags)).toEqual(sessionTags(id, 'tenant-a'));
      expect(sorted(closed.state?.changed)).toEqual(sessionTags(id, 'tenant-a'));
    });

    it('a session closed by the link model for inactivity; claiming leases writes no event and is no error', async () => {
      const { id } = await start(BOB);
      // Another instance of the store, on the database as the subgraph is given it (a write without its
      // event is refused), an hour on: the lease has expired, the session is idle past its time.
      const db = traceStateAccess(runtime.db, bonding.state!, 'bonding_', runtime.identity);
      const store = new BondingStore(db, { tickMs: 100, simSecondsPerTick: 60, sessionTtlSeconds: 60, maxOpenSessionsPerUser: 16 });
      const later = new Date(Date.now() + 3600_000);
      await waitFor(async () => {
        await store.runLinkModel(later);
        return (await events(`topic = 'bonding.session' AND key = $1 AND payload->>'kind' = 'closed'`, [id]))[0];
      }, 'the idle session to be closed');
      const closed = await eventOf(id, 'closed');
      expect(closed.payload['reason']).toBe('no activity for 60 s');
      expect(sorted(closed.tags)).toEqual(sessionTags(id, 'tenant-b'));
    });
  });

  describe('reads: what each answer depends on', () => {
    let aliceSession: string;
    let bobSession: string;
    beforeAll(async () => {
      aliceSession = (await start(ALICE)).id;
      bobSession = (await start(BOB)).id;
    });

    it('a session by id depends on that session alone: another written leaves it, itself written drops it', async () => {
      const read = await ask(ALICE, 'query ($id: ID!) { bondingSession(id: $id) { id state paths { id } lastKey { keyId } } }', { id: aliceSession });
      expect((read.data!['bondingSession'] as { id: string }).id).toBe(aliceSession);
      expect(read.state).toEqual({ tags: [`BondingSession:${aliceSession}`], grain: 'principal', lineage: runtime.identity });
      // Another user's, found or not, is a key too.
      const hidden = await ask(ALICE, 'query ($id: ID!) { bondingSession(id: $id) { id } }', { id: bobSession });
      expect(hidden.data!['bondingSession']).toBeNull();
      expect(hidden.state?.tags).toEqual([`BondingSession:${bobSession}`]);

      expect(intersects(read.state?.tags, (await eventOf(bobSession, 'metrics')).tags)).toBe(false);
      expect(intersects(read.state?.tags, (await eventOf(aliceSession, 'metrics')).tags)).toBe(true);
      // No read moves with the clock: the link model's steps are writes.
      expect(read.state?.validUntil).toBeUndefined();
    });

    it("a user's sessions and overview depend on the tenant's owner tag, an operator's overview on the collection", async () => {
      const mine = await ask(ALICE, '{ bondingSessions(first: 5) { id } currentBondingSession { id } bondingOverview { openSessions } }');
      expect(mine.errors).toBeUndefined();
      expect(mine.state).toEqual({ tags: ['BondingSession@tenant-a'], grain: 'principal', lineage: runtime.identity });
      expect(intersects(mine.state?.tags, (await eventOf(bobSession, 'started')).tags)).toBe(false);
      expect(intersects(mine.state?.tags, (await eventOf(aliceSession, 'started')).tags)).toBe(true);

      const all = await ask(OPERATOR, '{ bondingOverview { openSessions } }');
      expect(all.state?.tags).toEqual(['BondingSession']);
      expect(intersects(all.state?.tags, (await eventOf(bobSession, 'started')).tags)).toBe(true);
    });

    it('the event cursor (the log) and a measured time are not kept; a recommendation without it is', async () => {
      expect((await ask(ALICE, '{ bondingEventCursor }')).state?.uncacheable).toMatch(/outbox/);
      const timed = await ask(ALICE, 'query ($id: ID!) { bondingSession(id: $id) { recommendation { feasible elapsedMs } } }', { id: aliceSession });
      expect(timed.state?.uncacheable).toMatch(/elapsedMs/);
      const plain = await ask(ALICE, 'query ($id: ID!) { bondingSession(id: $id) { recommendation { feasible } } }', { id: aliceSession });
      expect(plain.state).toEqual({ tags: [`BondingSession:${aliceSession}`], grain: 'principal', lineage: runtime.identity });
    });
  });
});
