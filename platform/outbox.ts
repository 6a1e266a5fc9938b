import type { Queryable } from './db.js';

/** The NOTIFY channel that announces new outbox rows (payload: the new id). */
export const OUTBOX_CHANNEL = 'outbox_events';

export interface OutboxEvent<P = unknown> {
  topic: string;
  payload: P;
}

/**
 * Appends events inside the caller's transaction, so they exist exactly when the state change does,
 * and notifies listeners (PostgreSQL delivers NOTIFY on commit, never for a rolled-back transaction).
 */
export async function appendEvents(tx: Queryable, events: readonly OutboxEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const res = await tx.query<{ id: string | number }>(
    `INSERT INTO outbox (topic, payload)
     SELECT e.topic, e.payload FROM jsonb_to_recordset($1::jsonb) AS e(topic text, payload jsonb)
     RETURNING id`,
    [JSON.stringify(events)],
  );
  const ids = res.rows.map((r) => String(r.id));
  await tx.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, ids[ids.length - 1]]);
  return ids;
}
