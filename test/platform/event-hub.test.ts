import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../platform/db.js';
import { EventHub, outboxLog, type StoredEvent } from '../../platform/event-hub.js';
import { SYSTEM_VIEWER, type Viewer } from '../../platform/ownership.js';
import { appendEvents } from '../../platform/outbox.js';
import { migrate } from '../../platform/migrate.js';
import { fileURLToPath } from 'node:url';
import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_DATABASE_URL } from '../support/server.js';
import { within } from '../support/wait.js';

const platformMigrations = [{ owner: 'platform', dir: fileURLToPath(new URL('../../platform/migrations/', import.meta.url)) }];

async function take<P>(stream: AsyncIterableIterator<StoredEvent<P>>, n: number): Promise<StoredEvent<P>[]> {
  const out: StoredEvent<P>[] = [];
  while (out.length < n) {
    const item = await stream.next();
    if (item.done) break;
    out.push(item.value);
  }
  return out;
}

/** An in-memory database with the platform's tables, and its outbox log counting the replays it reads. */
async function countedLog() {
  const mem = await openDatabase({ url: undefined, dataDir: undefined });
  await migrate(mem, platformMigrations);
  const log = outboxLog(mem);
  let reads = 0;
  const counted = { ...log, topic: (...args: Parameters<typeof log.topic>) => (reads++, log.topic(...args)) };
  return { mem, counted, logReads: () => reads };
}

describe('outbox event hub', () => {
  let db: Database;
  let hub: EventHub;
  beforeAll(async () => {
    db = await openDatabase({ url: undefined, dataDir: undefined });
    await migrate(db, platformMigrations);
    hub = new EventHub(db);
    await hub.start();
  });
  afterAll(async () => {
    await hub.close();
    await db.close();
  });

  const write = async (n: number, key: (i: number) => string) => {
    for (let i = 0; i < n; i++) {
      await db.transaction((tx) => appendEvents(tx, [{ audience: 'everyone' as const, tags: [], topic: 't', key: key(i), payload: { i } }]));
    }
    await hub.wake();
  };

  it('delivers live events and replays from a cursor in numeric cursor order, past one page', async () => {
    const live = hub.stream<{ i: number }>('t', { viewer: SYSTEM_VIEWER });
    await write(1200, (i) => (i % 2 === 0 ? 'even' : 'odd'));
    const got = await take(live, 1200);
    expect(got.map((e) => e.payload.i)).toEqual([...Array(1200).keys()]);
    const ids = got.map((e) => BigInt(e.id));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    await live.return!();

    // Replay after the 7th event: ids 8.. in order (9 < 10 < 11 numerically, not as text), across pages.
    const replay = hub.stream<{ i: number }>('t', { viewer: SYSTEM_VIEWER, after: got[6]!.id, keys: ['odd'] });
    const again = await take(replay, 597);
    expect(again.map((e) => e.payload.i)).toEqual([...Array(1200).keys()].filter((i) => i > 6 && i % 2 === 1));
    // Then it continues live without a gap or duplicate.
    await write(4, () => 'odd');
    const more = await take(replay, 4);
    expect(more.map((e) => e.payload.i)).toEqual([0, 1, 2, 3]);
    expect(BigInt(more[0]!.id)).toBeGreaterThan(BigInt(again[again.length - 1]!.id));
    await replay.return!();
  });

  it("a replay longer than the stream bound is read page by page at the consumer's pace, never overflowing", async () => {
    const start = (await db.query<{ max: string }>('SELECT max(id)::text AS max FROM outbox')).rows[0]!.max;
    // 12,000 events in one statement: more than the stream's 10,000-event bound.
    await db.query(
      `INSERT INTO outbox (topic, key, payload, audience) SELECT 'bulk', 'k', jsonb_build_object('i', g), '"everyone"' FROM generate_series(1, 12000) AS g`,
    );
    await hub.wake();
    const replay = hub.stream<{ i: number }>('bulk', { viewer: SYSTEM_VIEWER, after: start, maxQueued: 1000 });
    const got = await take(replay, 12_000);
    expect(got.length).toBe(12_000);
    expect(got[0]!.payload.i).toBe(1);
    expect(got[11_999]!.payload.i).toBe(12_000);
    await replay.return!();
  });
});

describe('outbox event hub when the database fails', () => {
  it('a failed outbox read is reported, never thrown, and the next wake reads from the same position', async () => {
    const db = await openDatabase({ url: undefined, dataDir: undefined });
    await migrate(db, platformMigrations);
    let failNext = false;
    const flaky = {
      ...db,
      query: ((sql: string, params?: unknown[]) => {
        if (failNext && sql.includes('FROM outbox WHERE id >')) {
          failNext = false;
          return Promise.reject(new Error('connection lost'));
        }
        return db.query(sql, params);
      }) as typeof db.query,
    };
    const errors: unknown[] = [];
    const hub = new EventHub(flaky, { pollMs: 60_000, onError: (e) => errors.push(e) });
    await hub.start();
    const live = hub.stream<{ i: number }>('f', { viewer: SYSTEM_VIEWER });
    await db.transaction((tx) => appendEvents(tx, [{ audience: 'everyone' as const, tags: [], topic: 'f', key: null, payload: { i: 1 } }]));
    failNext = true;
    await expect(hub.wake()).resolves.toBeUndefined();
    expect(errors.map(String)).toEqual(['Error: connection lost']);
    await hub.wake();
    const first = await take(live, 1);
    expect(first.map((e) => e.payload.i)).toEqual([1]);
    await live.return!();
    await hub.close();
    await db.close();
  });

  it('a replay inside the newest events is served from memory; one from further back reads the log; both exact', async () => {
    const { mem, counted, logReads } = await countedLog();
    const small = new EventHub(mem, { log: counted, recent: 5, pollMs: 60_000 });
    await small.start();
    try {
      const live = small.stream<{ i: number }>('odd', { viewer: SYSTEM_VIEWER });
      for (let i = 0; i < 20; i++)
        await mem.transaction((tx) =>
          appendEvents(tx, [{ audience: 'everyone' as const, tags: [], topic: i % 2 ? 'odd' : 'even', key: `k${i % 3}`, payload: { i } }]),
        );
      await small.wake();
      const all = await within(take(live, 10), 'the live events');
      await live.return!();
      const ids = (await mem.query<{ id: string }>('SELECT id::text AS id FROM outbox ORDER BY outbox.id')).rows.map((r) => r.id);
      expect(all.map((e) => e.id)).toEqual(ids.filter((_, i) => i % 2 === 1));

      // After the 17th event: inside the 5 newest kept, so no read of the log; keys filtered.
      const near = small.stream<{ i: number }>('odd', { viewer: SYSTEM_VIEWER, after: ids[16]!, keys: ['k0', 'k1'] });
      expect((await within(take(near, 1), 'the replay from memory')).map((e) => e.payload.i)).toEqual([19]);
      expect(logReads()).toBe(0);
      await near.return!();

      // After the 3rd: older than what is kept, read from the log, the same events a live stream got.
      const far = small.stream<{ i: number }>('odd', { viewer: SYSTEM_VIEWER, after: ids[2]! });
      expect((await within(take(far, 8), 'the replay from the log')).map((e) => e.payload.i)).toEqual([3, 5, 7, 9, 11, 13, 15, 17, 19].slice(0, 8));
      expect(logReads()).toBeGreaterThan(0);
      await far.return!();
    } finally {
      await small.close();
      await mem.close();
    }
  });

  it('events read longer ago than the age bound leave the memory; a replay of them reads the log, exact', async () => {
    const { mem, counted, logReads } = await countedLog();
    let now = 1_000_000;
    const hub = new EventHub(mem, { log: counted, recent: 1000, recentAgeMs: 5_000, now: () => now, pollMs: 60_000 });
    await hub.start();
    const append = async (from: number, to: number) => {
      for (let i = from; i < to; i++)
        await mem.transaction((tx) => appendEvents(tx, [{ audience: 'everyone' as const, tags: [], topic: 't', key: null, payload: { i } }]));
      await hub.wake();
    };
    const replay = async (after: string, n: number) => {
      const stream = hub.stream<{ i: number }>('t', { viewer: SYSTEM_VIEWER, after });
      const got = (await within(take(stream, n), 'the replay')).map((e) => e.payload.i);
      await stream.return!();
      return got;
    };
    try {
      await append(0, 10);
      const ids = async () => (await mem.query<{ id: string }>('SELECT id::text AS id FROM outbox ORDER BY outbox.id')).rows.map((r) => r.id);
      now += 4_000;
      await append(10, 12);
      // All twelve within the age bound: served from memory.
      expect(await replay((await ids())[0]!, 11)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
      expect(logReads()).toBe(0);
      now += 1_001;
      await append(12, 13);
      // The first ten are past it (more than half of what is kept): dropped; the newer three are still kept.
      expect(await replay((await ids())[9]!, 3)).toEqual([10, 11, 12]);
      expect(logReads()).toBe(0);
      expect(await replay((await ids())[0]!, 12)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
      expect(logReads()).toBeGreaterThan(0);
    } finally {
      await hub.close();
      await mem.close();
    }
  });

  it.runIf(TEST_DATABASE_URL)('a terminated LISTEN connection is replaced and notifications flow again (postgres)', async () => {
    const app = `hub_reconnect_${randomUUID().slice(0, 8)}`;
    const schema = `hub_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const url = `${TEST_DATABASE_URL}${TEST_DATABASE_URL!.includes('?') ? '&' : '?'}application_name=${app}`;
    const db = await openDatabase({ url, schema });
    await migrate(db, platformMigrations);
    // A poll too slow to matter: only NOTIFY (and the wake after reconnecting) can deliver in time.
    const hub = new EventHub(db, { pollMs: 60_000 });
    await hub.start();
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      const killed = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [app]);
      expect(killed.rowCount).toBe(1);
      const live = hub.stream<{ i: number }>('r', { viewer: SYSTEM_VIEWER });
      // Written by another connection, as another instance would: only a working LISTEN wakes this hub.
      const writer = await openDatabase({ url: TEST_DATABASE_URL, schema });
      // The first arrives once the LISTEN connection is back (by NOTIFY, or the wake that follows the
      // reconnect when it was written before); the second, written after that, only by NOTIFY.
      for (const i of [1, 2]) {
        await writer.transaction((tx) => appendEvents(tx, [{ audience: 'everyone' as const, tags: [], topic: 'r', key: null, payload: { i } }]));
        const got = await within(take(live, 1), `event ${i} after the LISTEN connection was terminated`);
        expect(got.map((e) => e.payload.i)).toEqual([i]);
      }
      const listeners = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [app]);
      expect(listeners.rows[0].n).toBe(1);
      await live.return!();
      await writer.close();
    } finally {
      await hub.close();
      await db.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    }
  });
});

describe('event audiences', () => {
  const rentalMigrations = fileURLToPath(new URL('../../subgraphs/rental/migrations/', import.meta.url));
  /** A copy of `dir`'s migrations up to (excluding) `before`: the schema as an older release left it. */
  const olderRelease = (owner: string, dir: string, before: string) => {
    const copy = mkdtempSync(join(tmpdir(), `${owner}-migrations-`));
    for (const file of readdirSync(dir).filter((f) => f < before)) copyFileSync(join(dir, file), join(copy, file));
    return { owner, dir: copy };
  };
  const tenantViewer = (tenant: string) => ({ all: false as const, owner: { tenant, principal: `${tenant}-user` } });

  it('"everyone" is explicit; an event without an audience reaches operators only; old rows are placed by topic or withheld', async () => {
    const db = await openDatabase({ url: undefined, dataDir: undefined });
    // An outbox written while a missing audience meant "everyone".
    await migrate(db, [olderRelease('platform', platformMigrations[0]!.dir, '007'), olderRelease('rental', rentalMigrations, '009')]);
    const owned = { owner: { tenant: 'acme', principal: 'acme-user' }, grain: 'tenant' };
    await db.query(
      `INSERT INTO outbox (topic, key, payload, audience) VALUES
         ('rental.fleet_summary', NULL, '{"n":1}', NULL),
         ('rental.machine_status', 'EQ-001', '{"n":2}', NULL),
         ('rental.booking', 'BK-1', '{"n":3}', $1::jsonb),
         ('legacy.unplaced', NULL, '{"n":4}', NULL)`,
      [JSON.stringify(owned)],
    );
    await migrate(db, [...platformMigrations, { owner: 'rental', dir: rentalMigrations }]);
    const audiences = await db.query<{ n: number; audience: unknown }>(`SELECT (payload->>'n')::int AS n, audience FROM outbox ORDER BY id`);
    expect(audiences.rows).toEqual([
      { n: 1, audience: 'everyone' },
      { n: 2, audience: 'everyone' },
      { n: 3, audience: owned },
      { n: 4, audience: null },
    ]);
    // New rows must say whose they are: the database refuses one that does not.
    await expect(db.query(`INSERT INTO outbox (topic, payload) VALUES ('t', '{}')`)).rejects.toThrow(/outbox_audience_declared/);
    await db.transaction((tx) => appendEvents(tx, [{ audience: 'everyone', tags: [], topic: 'rental.fleet_summary', payload: { n: 5 } }]));
    expect((await db.query<{ audience: unknown }>(`SELECT audience FROM outbox WHERE payload->>'n' = '5'`)).rows[0]!.audience).toBe('everyone');

    const hub = new EventHub(db, { pollMs: 60_000 });
    await hub.start();
    const topics = ['rental.fleet_summary', 'rental.machine_status', 'rental.booking', 'legacy.unplaced'];
    let mark = 100;
    /** What `viewer` receives replaying every topic from the start: read up to a fleet-wide mark written after. */
    const seen = async (viewer: Viewer) => {
      const replays = topics.map((topic) => hub.stream<{ n: number }>(topic, { viewer, after: '0' }));
      const end = ++mark;
      await db.transaction((tx) =>
        appendEvents(
          tx,
          topics.map((topic) => ({ audience: 'everyone' as const, tags: [], topic, payload: { n: end } })),
        ),
      );
      await hub.wake();
      const out: number[] = [];
      for (const replay of replays) {
        for (let e = await replay.next(); !e.done && e.value.payload.n !== end; e = await replay.next())
          if (e.value.payload.n < 100) out.push(e.value.payload.n);
        await replay.return!();
      }
      return out.sort();
    };
    try {
      expect(await seen(SYSTEM_VIEWER)).toEqual([1, 2, 3, 4, 5]);
      expect(await seen(tenantViewer('acme'))).toEqual([1, 2, 3, 5]);
      expect(await seen(tenantViewer('globex'))).toEqual([1, 2, 5]);
    } finally {
      await hub.close();
      await db.close();
    }
  });
});
