import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../platform/db.js';
import { DatabaseUnavailableError } from '../../platform/db-errors.js';

describe('the embedded database on a thread of its own (platform/pglite-thread.ts)', () => {
  let db: Database;
  beforeAll(async () => {
    db = await openDatabase({ dataDir: undefined, readCache: false });
    await db.exec(`CREATE TABLE things (id int PRIMARY KEY, name text NOT NULL CONSTRAINT name_short CHECK (length(name) < 10))`);
  });
  afterAll(async () => {
    await db.close();
  });

  it('runs a statement while the event loop goes on turning', async () => {
    let turns = 0;
    const ticker = setInterval(() => turns++, 1);
    try {
      const res = await db.query<{ n: number }>('SELECT count(*) AS n FROM generate_series(1, 3000000)');
      expect(res.rows[0]!.n).toBe(3_000_000);
    } finally {
      clearInterval(ticker);
    }
    // On the calling thread the statement would hold the loop until it ends: not one timer would fire.
    expect(turns).toBeGreaterThan(2);
  });

  it('carries values both ways: dates, bytes, JSON, big integers as numbers or refused', async () => {
    const at = new Date('2026-11-28T12:34:56.789Z');
    const bytes = new Uint8Array([0, 1, 254, 255]);
    const res = await db.query<{ at: Date; bytes: Uint8Array; doc: unknown; n: number; text: string }>(
      `SELECT $1::timestamptz AS at, $2::bytea AS bytes, $3::jsonb AS doc, 9007199254740991::int8 AS n, $4::text AS text`,
      [at, bytes, JSON.stringify({ k: [1, 'two', null] }), 'héllo'],
    );
    const row = res.rows[0]!;
    expect(row.at).toBeInstanceOf(Date);
    expect(row.at.toISOString()).toBe(at.toISOString());
    expect([...row.bytes]).toEqual([0, 1, 254, 255]);
    expect(row.doc).toEqual({ k: [1, 'two', null] });
    expect(row.n).toBe(Number.MAX_SAFE_INTEGER);
    expect(row.text).toBe('héllo');
    const refused = await db.query('SELECT 9007199254740993::int8 AS n').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RangeError);
    expect((refused as Error).message).toMatch(/9007199254740993 is not a safe integer/);
  });

  it("keeps a statement's error as the server raised it: SQLSTATE, constraint, message", async () => {
    await db.query('INSERT INTO things VALUES (1, $1)', ['one']);
    const duplicate = (await db.query('INSERT INTO things VALUES (1, $1)', ['again']).catch((error: unknown) => error)) as Record<string, unknown>;
    expect(duplicate).toBeInstanceOf(Error);
    expect(duplicate).not.toBeInstanceOf(DatabaseUnavailableError);
    expect(duplicate).toMatchObject({ code: '23505', constraint: 'things_pkey', table: 'things' });
    expect(duplicate['message']).toMatch(/duplicate key value violates unique constraint "things_pkey"/);
    const check = (await db.query('INSERT INTO things VALUES (2, $1)', ['far too long a name']).catch((error: unknown) => error)) as Record<string, unknown>;
    expect(check).toMatchObject({ code: '23514', constraint: 'name_short' });
    expect(await db.query('SELEC 1').catch((error: unknown) => (error as { code?: string }).code)).toBe('42601');
    // Nothing of the failed statements stayed.
    expect((await db.query('SELECT count(*)::int AS n FROM things')).rows).toEqual([{ n: 1 }]);
  });

  it('commits a transaction that resolves, rolls back one that throws (rethrowing its own error)', async () => {
    await db.transaction(async (tx) => {
      await tx.query('INSERT INTO things VALUES (10, $1)', ['ten']);
      await tx.query('UPDATE things SET name = $1 WHERE id = 10', ['TEN']);
    });
    expect((await db.query('SELECT name FROM things WHERE id = 10')).rows).toEqual([{ name: 'TEN' }]);
    const mine = new Error('changed my mind');
    const thrown = await db
      .transaction(async (tx) => {
        await tx.query('INSERT INTO things VALUES (11, $1)', ['eleven']);
        throw mine;
      })
      .catch((error: unknown) => error);
    expect(thrown).toBe(mine);
    // A failed statement inside rolls the whole transaction back too.
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO things VALUES (12, $1)', ['twelve']);
        await tx.query('INSERT INTO things VALUES (10, $1)', ['ten again']);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.query('SELECT id FROM things WHERE id > 9 ORDER BY id')).rows).toEqual([{ id: 10 }]);
  });

  it('lets no other statement in while a transaction is open: it runs after the commit and sees it', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let inserted!: () => void;
    const didInsert = new Promise<void>((resolve) => (inserted = resolve));
    const order: string[] = [];
    const tx = db
      .transaction(async (t) => {
        await t.query('INSERT INTO things VALUES (20, $1)', ['twenty']);
        inserted();
        await held;
      })
      .then(() => order.push('committed'));
    await didInsert;
    // Sent to the thread before the transaction's end: it must still wait for the end.
    const outside = db.query<{ n: number }>('SELECT count(*)::int AS n FROM things WHERE id = 20').then((res) => {
      order.push('outside read');
      return res;
    });
    release();
    await tx;
    expect((await outside).rows).toEqual([{ n: 1 }]);
    expect(order).toEqual(['committed', 'outside read']);
  });

  it('delivers NOTIFY payloads to listeners until they stop listening', async () => {
    const payloads: string[] = [];
    const stop = await db.listen('thread_test', (payload) => payloads.push(payload));
    await db.query(`SELECT pg_notify('thread_test', 'first')`);
    await db.query(`SELECT pg_notify('thread_test', 'second')`);
    await expect.poll(() => payloads).toEqual(['first', 'second']);
    await stop();
    await db.query(`SELECT pg_notify('thread_test', 'third')`);
    // A statement after the notify: had a listener been left, its payload would have arrived before this answer.
    await db.query('SELECT 1');
    expect(payloads).toEqual(['first', 'second']);
  });

  it('fails every call as unavailable once closed', async () => {
    const other = await openDatabase({ dataDir: undefined });
    expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await other.close();
    await expect(other.query('SELECT 1')).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await expect(other.transaction(async (tx) => tx.query('SELECT 1'))).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await other.close();
  });

  it('closes once when closed twice at once; calls made meanwhile fail as unavailable; a transaction then runs nothing', async () => {
    const other = await openDatabase({ dataDir: undefined });
    const before = other.query<{ one: number }>('SELECT 1 AS one');
    const first = other.close();
    const second = other.close();
    const during = other.query('SELECT 2').catch((error: unknown) => error);
    await Promise.all([first, second]);
    // Sent before the close: answered first.
    expect((await before).rows).toEqual([{ one: 1 }]);
    expect(await during).toBeInstanceOf(DatabaseUnavailableError);
    let ran = false;
    const tx = await other
      .transaction(async (t) => {
        ran = true;
        return t.query('SELECT 3');
      })
      .catch((error: unknown) => error);
    expect(tx).toBeInstanceOf(DatabaseUnavailableError);
    expect(ran).toBe(false);
  });

  it('refuses a parameter that cannot cross to the thread, and goes on serving', async () => {
    const refused = await db.query('SELECT $1::text AS x', [() => 'a function']).catch((error: unknown) => error);
    expect((refused as Error).name).toBe('DataCloneError');
    expect((await db.query('SELECT $1::text AS x', ['after'])).rows).toEqual([{ x: 'after' }]);
  });

  it('does not keep a process alive that has finished its work with the database open', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pglite-thread-'));
    try {
      const script = join(dir, 'script.mts');
      const dbModule = pathToFileURL(join(process.cwd(), 'platform/db.ts')).href;
      writeFileSync(
        script,
        `import { openDatabase } from ${JSON.stringify(dbModule)};\n` +
          `const db = await openDatabase({ dataDir: undefined });\n` +
          `console.log(JSON.stringify((await db.query('SELECT 41 + 1 AS answer')).rows));\n`,
      );
      const run = spawnSync(process.execPath, ['--import', 'tsx', script], { cwd: process.cwd(), encoding: 'utf8', timeout: 60_000 });
      expect(run.stderr).toBe('');
      expect(run.stdout.trim()).toBe('[{"answer":42}]');
      // Exited by itself (spawnSync would have killed it at the timeout: signal SIGTERM, status null).
      expect(run.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
