import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../platform/db.js';
import { migrate } from '../../platform/migrate.js';
import { appendEvents } from '../../platform/outbox.js';
import { TEST_DATABASE_URL } from '../support/server.js';

const platformMigrations = [{ owner: 'platform', dir: fileURLToPath(new URL('../../platform/migrations/', import.meta.url)) }];

/*
 * The outbox's ids become visible in order (platform/outbox.ts, `lockCommitOrder`): a reader that has seen
 * an id never sees a smaller one later, which is what lets every reader keep one number as its cursor. On
 * PostgreSQL, where writers run at once, the lock must be taken before the id is drawn; appendEvents does
 * both in one statement. PGlite runs one transaction at a time, so only a server can break it.
 */
describe.runIf(TEST_DATABASE_URL)('outbox ids seen in order by a reader while writers commit at once (PostgreSQL)', () => {
  let db: Database;
  const schema = `outbox_order_${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    db = await openDatabase({ url: TEST_DATABASE_URL, schema, poolSize: 12 });
    await migrate(db, platformMigrations);
  });
  afterAll(async () => {
    await db?.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
    await db?.close();
  });

  it('never shows an id before a smaller one: 8 writers, 40 transactions each, one reader polling', async () => {
    const writers = 8;
    const perWriter = 40;
    let writing = true;
    let cursor = 0;
    const late: number[] = [];
    const seen = new Set<number>();
    const reader = (async () => {
      for (let polls = 0; (writing || seen.size < writers * perWriter * 2) && polls < 100_000; polls++) {
        const res = await db.query<{ id: number }>('SELECT id FROM outbox ORDER BY id');
        for (const { id } of res.rows) {
          if (seen.has(id)) continue;
          // A new id at or below the cursor appeared after a larger one had been read: out of order.
          if (id <= cursor) late.push(id);
          seen.add(id);
        }
        cursor = Math.max(cursor, ...res.rows.map((r) => r.id));
      }
    })();
    const written = Promise.all(
      Array.from({ length: writers }, (_, w) =>
        (async () => {
          for (let i = 0; i < perWriter; i++) {
            await db.transaction(async (tx) => {
              await appendEvents(tx, [
                { audience: 'everyone', tags: [], topic: 'order.test', key: `w${w}`, payload: { i } },
                { audience: 'everyone', tags: [], topic: 'order.test', key: `w${w}`, payload: { i, second: true } },
              ]);
              // Work after the ids are drawn, before the commit: the window in which an unordered writer
              // would let a later id commit first.
              await tx.query('SELECT pg_sleep($1)', [Math.random() * 0.003]);
            });
          }
        })(),
      ),
    );
    // The reader stops once the writers are done, whether they succeeded or not.
    await written.finally(() => (writing = false));
    await reader;
    expect(seen.size).toBe(writers * perWriter * 2);
    expect(late).toEqual([]);
  });
});
