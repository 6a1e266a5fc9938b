import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import { systemClock } from '../../../platform/clock.js';
import { openDatabase, type Database } from '../../../platform/db.js';
import { migrate } from '../../../platform/migrate.js';
import { startSubgraphRuntime } from '../../../platform/runtime.js';
import { bonding } from '../../../subgraphs/bonding/index.js';
import { DEFAULT_TOPOLOGY, initialState, step, type LinkModelState } from '../../../subgraphs/bonding/link-model.js';
import { BondingStore } from '../../../subgraphs/bonding/store.js';
import { rest } from '../../support/http.js';
import { backends, dropSchema, startTestServer, TEST_DATABASE_URL, type Backend } from '../../support/server.js';
import { until } from '../../support/wait.js';

/** The link model run `ticks` steps from its seed, as the service must have run it. */
function replay(seed: number, ticks: number, dt = 60): LinkModelState {
  let s = initialState(DEFAULT_TOPOLOGY, seed);
  for (let i = 0; i < ticks; i++) s = step(s, dt).state;
  return s;
}

async function storedSession(db: Database, id: string) {
  const res = await db.query<{ tick: number; seed: number; model: LinkModelState; state: string }>(
    'SELECT tick, seed, model, state FROM bonding_sessions WHERE id = $1',
    [id],
  );
  return res.rows[0]!;
}

describe.each(backends)('bonding sessions survive a restart (%s)', (backend: Backend) => {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-bonding-'));
  const schema = `t_bond_restart_${randomBytes(4).toString('hex')}`;
  const start = () => startTestServer({ backend, env: { DATA_DIR: dir, BONDING_TICK_MS: '200' }, ...(backend === 'postgres' ? { schema } : {}) });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    if (backend === 'postgres') await dropSchema(schema);
  });

  it('keeps the state machine, planes, keys and the link model, which resumes exactly where it stopped', async () => {
    const first = await start();
    const started = await rest(first.url, 'POST', '/bonding/api/bonding/start?user_id=persist&seed=77');
    const id = started.body['session_id'] as string;
    await until(async () => (await rest(first.url, 'GET', `/bonding/api/bonding/status?session_id=${id}`)).body['tick'] >= 3, 'three steps');
    const key = await rest(first.url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 128, seed: 3 });
    expect(key.body['status']).toBe('completed');
    await first.close();

    const second = await start();
    const after = await rest(second.url, 'GET', '/bonding/api/bonding/status?user_id=persist');
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ session_id: id, seed: 77, user_id: 'persist' });
    expect(after.body['last_key']).toMatchObject({ key_id: key.body['key_id'], fingerprint: key.body['fingerprint'], status: 'completed' });
    expect(after.body['planes']['security']['last_action']).toContain(key.body['key_id']);
    const resumedAt = after.body['tick'] as number;
    expect(resumedAt).toBeGreaterThanOrEqual(3);
    await until(async () => (await storedSession(second.db, id)).tick >= resumedAt + 3, 'steps after the restart');
    await second.close();
    // Stopped now: the stored model is the seed's trajectory, step for step, across the restart.
    const db = await openDatabase(backend === 'postgres' ? { url: TEST_DATABASE_URL, schema } : { dataDir: dir });
    try {
      const row = await storedSession(db, id);
      expect(row.model).toEqual(replay(77, row.tick));
    } finally {
      await db.close();
    }
    // Two server starts: generous on a busy machine.
  }, 180_000);
});

if (!TEST_DATABASE_URL) console.warn('[bonding-persistence] TEST_DATABASE_URL is not set: the PostgreSQL multi-instance tests are skipped.');

describe.skipIf(!TEST_DATABASE_URL)('two instances on one PostgreSQL', () => {
  const schema = `t_bond_multi_${randomBytes(4).toString('hex')}`;
  const open: { close(): Promise<void> }[] = [];
  const sets = [{ owner: 'platform', dir: fileURLToPath(new URL('../../../platform/migrations/', import.meta.url)) }, ...bonding.migrations];
  const connect = async () => {
    const db = await openDatabase({ url: TEST_DATABASE_URL, schema });
    open.push(db);
    return db;
  };
  const options = { tickMs: 20, simSecondsPerTick: 60, sessionTtlSeconds: 3600, maxOpenSessionsPerUser: 3 };
  afterAll(async () => {
    for (const c of open.reverse()) await c.close().catch(() => undefined);
    await dropSchema(schema);
  });

  it('never step one session twice, even racing for a free lease every round', async () => {
    const dbA = await connect();
    const dbB = await connect();
    await migrate(dbA, sets);
    const a = new BondingStore(dbA, options);
    const b = new BondingStore(dbB, options);
    const session = await a.startSession({ user: { tenant: 'tests', principal: 'race' }, seed: 5, paths: DEFAULT_TOPOLOGY, now: new Date() });
    const winners = { a: 0, b: 0 };
    for (let round = 0; round < 40; round++) {
      // The lease free and the step due: both instances go for it at once.
      await dbA.query(`UPDATE bonding_sessions SET lease_until = NULL, next_tick_at = now() - interval '1 second'`);
      const now = new Date(Date.now() + 1000);
      const [sa, sb] = await Promise.all([a.runLinkModel(now), b.runLinkModel(now)]);
      expect(sa + sb).toBe(1);
      winners.a += sa;
      winners.b += sb;
    }
    const row = await storedSession(dbA, session.id);
    expect(row.tick).toBe(40);
    expect(row.model).toEqual(replay(5, 40));
    const ticks = await dbA.query<{ tick: number }>(
      `SELECT (payload->>'tick')::int AS tick FROM outbox WHERE topic = 'bonding.session' AND key = $1 AND payload->>'kind' = 'metrics' ORDER BY id`,
      [session.id],
    );
    expect(ticks.rows.map((r) => r.tick)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(winners.a + winners.b).toBe(40);
  });

  it('running services: one instance stops, the other takes its sessions over after the lease; each step once', async () => {
    const config = loadConfig({ DATABASE_URL: TEST_DATABASE_URL, DATABASE_SCHEMA: schema, BONDING_TICK_MS: '40', LOG_LEVEL: 'silent' });
    const ra = await startSubgraphRuntime({ config, clock: systemClock, modules: [bonding] });
    open.push(ra);
    const store = new BondingStore(ra.db, options);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await store.startSession({ user: { tenant: 'tests', principal: `svc-${i}` }, seed: 100 + i, paths: DEFAULT_TOPOLOGY, now: new Date() })).id);
    await until(async () => (await Promise.all(ids.map((id) => storedSession(ra.db, id)))).every((s) => s.tick >= 5), 'steps on the first instance');
    // Then the first stops.
    const rb = await startSubgraphRuntime({ config, clock: systemClock, modules: [bonding] });
    open.push(rb);
    // The second instance runs beside the first, which holds the leases, for two more steps.
    const running = await Promise.all(ids.map(async (id) => (await storedSession(ra.db, id)).tick));
    await until(
      async () => (await Promise.all(ids.map((id) => storedSession(ra.db, id)))).every((s, i) => s.tick >= running[i]! + 2),
      'two steps with both instances running',
    );
    const owners = await ra.db.query<{ lease_owner: string }>('SELECT DISTINCT lease_owner FROM bonding_sessions WHERE id = ANY($1)', [ids]);
    const firstOwner = owners.rows.map((r) => r.lease_owner);
    const ticksBefore = await Promise.all(ids.map(async (id) => (await storedSession(rb.db, id)).tick));
    await ra.close();
    await until(
      async () => {
        const now = await Promise.all(ids.map((id) => storedSession(rb.db, id)));
        return now.every((s, i) => s.tick >= ticksBefore[i]! + 5);
      },
      'steps on the second instance',
      { timeoutMs: 20_000 },
    );
    await rb.close();
    expect(firstOwner).toHaveLength(1);
    const db = await connect();
    for (const [i, id] of ids.entries()) {
      const stored = await storedSession(db, id);
      expect(stored.model).toEqual(replay(100 + i, stored.tick));
      const events = await db.query<{ tick: number; runner: string }>(
        `SELECT (payload->>'tick')::int AS tick, payload->>'runner' AS runner FROM outbox
         WHERE topic = 'bonding.session' AND key = $1 AND payload->>'kind' = 'metrics' ORDER BY id`,
        [id],
      );
      // Every step once, in order, by two instances between them.
      expect(events.rows.map((r) => r.tick)).toEqual(Array.from({ length: stored.tick }, (_, t) => t + 1));
      expect(new Set(events.rows.map((r) => r.runner)).size).toBe(2);
    }
  }, 60_000);

  it('the per-user cap holds under concurrent starts on both instances', async () => {
    const a = new BondingStore(await connect(), options);
    const b = new BondingStore(await connect(), options);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? a : b).startSession({ user: { tenant: 'tests', principal: 'crowd' }, seed: i, paths: DEFAULT_TOPOLOGY, now: new Date() }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(rejected).toHaveLength(7);
    for (const r of rejected) expect((r.reason as { extensions?: { code?: string } }).extensions?.code).toBe('CONFLICT');
  });
});

describe('the link model with no open session', () => {
  it('writes nothing, so the embedded read cache keeps its answers; with a session it steps it', async () => {
    const db = await openDatabase({ dataDir: undefined });
    try {
      await migrate(db, [{ owner: 'platform', dir: fileURLToPath(new URL('../../../platform/migrations/', import.meta.url)) }, ...bonding.migrations]);
      const store = new BondingStore(db, { tickMs: 20, simSecondsPerTick: 60, sessionTtlSeconds: 3600, maxOpenSessionsPerUser: 3 });
      const read = () => db.query(`SELECT count(*)::int AS n FROM bonding_sessions`);
      await read();
      const before = db.readCacheStats()!;
      for (let tick = 1; tick <= 3; tick++) expect(await store.runLinkModel(new Date(Date.now() + tick * 1000))).toBe(0);
      await read();
      expect(db.readCacheStats()!.hits).toBeGreaterThan(before.hits);
      const session = await store.startSession({ user: { tenant: 'tests', principal: 'idle' }, seed: 9, paths: DEFAULT_TOPOLOGY, now: new Date() });
      expect(await store.runLinkModel(new Date(Date.now() + 60_000))).toBe(1);
      expect((await storedSession(db, session.id)).tick).toBe(1);
    } finally {
      await db.close();
    }
  });
});
