import type { Database } from './db.js';

/** What a restore behind the stream lost, in words for the log. */
export const restoreMessage = (lost: { lostFrom: string; lostTo: string }) =>
  `the database is behind its event stream (restored from a backup): events ${lost.lostFrom}..${lost.lostTo} are in the stream but not in the database; new events follow them`;

/**
 * This database's identity, made the first time the service opens it (a copy of a data directory made
 * before that, such as the test suite's migrated template, still gets one of its own).
 */
export async function databaseIdentity(db: Database): Promise<string> {
  await db.query('INSERT INTO database_identity (id) VALUES (gen_random_uuid()) ON CONFLICT (one) DO NOTHING');
  const res = await db.query<{ id: string }>('SELECT id::text AS id FROM database_identity');
  return res.rows[0]!.id;
}
