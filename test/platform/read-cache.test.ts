import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../platform/db.js';
import { ReadCache } from '../../platform/read-cache.js';

describe('the embedded database read cache', () => {
  let db: Database;
  beforeAll(async () => {
    db = await openDatabase({ dataDir: undefined });
    await db.exec(`CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, tags text[] NOT NULL DEFAULT '{}', doc jsonb)`);
    await db.query(`INSERT INTO items (id, name, tags, doc) VALUES (1, 'one', '{a,b}', '{"k": [1, 2]}'), (2, 'two', '{}', null)`);
  });
  afterAll(async () => {
    await db.close();
  });

  const stats = () => db.readCacheStats()!;
  const names = async () => (await db.query<{ name: string }>('SELECT name FROM items ORDER BY id')).rows.map((r) => r.name);

  it('answers a repeated read from memory, with the same rows', async () => {
    const first = await db.query('SELECT * FROM items WHERE id = $1', [1]);
    const before = stats();
    const again = await db.query('SELECT * FROM items WHERE id = $1', [1]);
    expect(again).toEqual(first);
    expect(stats().hits).toBe(before.hits + 1);
    expect(stats().misses).toBe(before.misses);
    // Other parameters are another read.
    expect((await db.query<{ name: string }>('SELECT * FROM items WHERE id = $1', [2])).rows[0]!.name).toBe('two');
    expect(stats().misses).toBe(before.misses + 1);
  });

  it('gives every caller rows of its own, and what they hold frozen', async () => {
    await db.query('SELECT * FROM items WHERE id = 1');
    const a = await db.query<{ name: string; tags: string[]; __typename?: string }>('SELECT * FROM items WHERE id = 1');
    a.rows[0]!.__typename = 'Item';
    a.rows[0]!.name = 'changed by a caller';
    expect(() => a.rows[0]!.tags.push('c')).toThrow(TypeError);
    const b = await db.query<{ name: string; tags: string[]; __typename?: string }>('SELECT * FROM items WHERE id = 1');
    expect(b.rows[0]).toMatchObject({ name: 'one', tags: ['a', 'b'] });
    expect(b.rows[0]!.__typename).toBeUndefined();
  });

  it('drops everything at a write: a statement, a transaction, a script', async () => {
    expect(await names()).toEqual(['one', 'two']);
    await db.query(`UPDATE items SET name = 'uno' WHERE id = 1`);
    expect(await names()).toEqual(['uno', 'two']);
    await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO items (id, name) VALUES (3, 'three')`);
    });
    expect(await names()).toEqual(['uno', 'two', 'three']);
    await db.exec(`DELETE FROM items WHERE id = 3; UPDATE items SET name = 'one' WHERE id = 1;`);
    expect(await names()).toEqual(['one', 'two']);
    // A transaction that rolls back changes nothing, and the next read still runs against the data.
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`UPDATE items SET name = 'lost' WHERE id = 2`);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await names()).toEqual(['one', 'two']);
  });

  it('never keeps a read that depends on more than the data, and drops everything around a statement with an effect', async () => {
    const cache = new ReadCache();
    for (const sql of ['SELECT now()', 'SELECT id FROM items WHERE created < current_timestamp', 'SELECT random()', 'SELECT clock_timestamp()::text AS t']) {
      expect(cache.classify(sql, undefined), sql).toEqual({ kind: 'volatile' });
    }
    for (const sql of [
      "SELECT nextval('s')",
      'SELECT pg_advisory_xact_lock(1)',
      'SELECT * FROM items FOR UPDATE',
      'INSERT INTO items (id, name) VALUES (9, $1) RETURNING id',
      'WITH x AS (DELETE FROM items RETURNING id) SELECT * FROM x',
      "SELECT set_config('a.b', 'c', false)",
      'CREATE TABLE t (a int)',
    ]) {
      expect(cache.classify(sql, undefined), sql).toEqual({ kind: 'write' });
    }
    expect(cache.classify('SELECT * FROM items WHERE id = $1', [1]).kind).toBe('read');
    // A value without one exact text form is not a key; a moment is nearly always the clock's now.
    expect(cache.classify('SELECT * FROM items WHERE at < $1', [new Date(0)]).kind).toBe('volatile');
    expect(cache.classify('SELECT * FROM items WHERE id = $1', [1n]).kind).toBe('volatile');
    expect(cache.classify('SELECT * FROM items WHERE doc = $1', [{ k: 1 }]).kind).toBe('volatile');
    // A volatile read runs every time (neither a hit nor kept) and leaves what is kept alone.
    await db.query('SELECT name FROM items WHERE id = 2');
    const before = stats();
    expect(before.entries).toBeGreaterThan(0);
    await db.query('SELECT clock_timestamp()::text AS t');
    await db.query('SELECT clock_timestamp()::text AS t');
    expect(stats().hits).toBe(before.hits);
    expect(stats().entries).toBe(before.entries);
    // A statement with an effect drops everything.
    await db.query('SELECT pg_advisory_unlock_all()');
    expect(stats().entries).toBe(0);
  });

  it('does not keep a read that was running when a write began', () => {
    const cache = new ReadCache();
    const key = (cache.classify('SELECT name FROM items', undefined) as { key: string }).key;
    const token = cache.begin();
    cache.changed();
    cache.put(key, token, { rows: [{ name: 'before the write' }], rowCount: 1 });
    expect(cache.get(key)).toBeUndefined();
    cache.put(key, cache.begin(), { rows: [{ name: 'after' }], rowCount: 1 });
    expect(cache.get(key)?.rows).toEqual([{ name: 'after' }]);
  });

  it('stays bounded', () => {
    const cache = new ReadCache({ maxEntries: 3, maxRows: 2 });
    for (let i = 0; i < 10; i++) cache.put(`k${i}`, cache.begin(), { rows: [{ i }], rowCount: 1 });
    expect(cache.size).toBeLessThanOrEqual(3);
    const big = 'big';
    cache.put(big, cache.begin(), { rows: [{}, {}, {}], rowCount: 3 });
    expect(cache.get(big)).toBeUndefined();
    // The rows kept over all answers are bounded too.
    const rows = new ReadCache({ maxRows: 10, maxKeptRows: 5 });
    rows.put('a', rows.begin(), { rows: [{}, {}, {}], rowCount: 3 });
    rows.put('b', rows.begin(), { rows: [{}, {}, {}], rowCount: 3 });
    expect(rows.get('a')).toBeUndefined();
    expect(rows.get('b')?.rowCount).toBe(3);
  });

  it('answers nothing once the database is closed, and is off when asked', async () => {
    const other = await openDatabase({ dataDir: undefined });
    await other.query('SELECT 1 AS one');
    await other.query('SELECT 1 AS one');
    expect(other.readCacheStats()!.hits).toBe(1);
    await other.close();
    await expect(other.query('SELECT 1 AS one')).rejects.toThrow();
    const plain = await openDatabase({ dataDir: undefined, readCache: false });
    expect(plain.readCacheStats()).toBeNull();
    await plain.close();
  });
});
