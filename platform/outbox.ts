import { z } from 'zod';
import type { Queryable } from './db.js';
import type { Grain, Owner } from './ownership.js';
import { noteAppended } from './state-trace.js';

/** The NOTIFY channel that announces new outbox rows (payload: the newest id). */
export const OUTBOX_CHANNEL = 'outbox_events';

/** Serializes outbox writers so ids commit in order; held only until the writer's commit. */
const OUTBOX_LOCK = 7_231_004_117;

/**
 * Who may receive an event, declared by whoever writes it (the event hub applies it to every subscriber,
 * live and on replay; operators receive everything):
 * - `everyone`: fleet-wide state (positions, summaries, materializations), stored as the JSON string
 *   "everyone": an explicit marker, never an absence;
 * - an owner without `private`: the owner's alone (at its grain);
 * - an owner with `private`: every subscriber receives it, those payload fields null for all but the owner
 *   (a machine's status names the quote that reserved it only to that quote's tenant).
 */
export type Audience = 'everyone' | { readonly owner: Owner; readonly grain: Grain; readonly private?: readonly string[] };

const OwnedAudience = z.object({
  owner: z.object({ tenant: z.string(), principal: z.string() }),
  grain: z.enum(['tenant', 'principal']),
  private: z.array(z.string()).optional(),
});

/**
 * The audience a stored event declares, read from its row or its stream header; null when it declares
 * none or something unrecognized. An event with no audience reaches no tenant (only operators): rows
 * from before audiences were explicit that no migration could place (platform/migrations/007) stay there.
 */
export function audienceOf(stored: unknown): Audience | null {
  if (stored === 'everyone') return 'everyone';
  const owned = OwnedAudience.safeParse(stored);
  return owned.success ? owned.data : null;
}

export interface OutboxEvent<P = unknown> {
  topic: string;
  /** The filter key subscribers select on (machine id, booking id); omit for fleet-wide events. */
  key?: string | null;
  payload: P;
  /** Required: an event cannot be written without saying whose it is. */
  audience: Audience;
  /**
   * Required: what the write changed, as state caches read it (platform/state-trace.ts: the collection of
   * every state table written, and the rows and owners it touched). Empty for an event about no state.
   */
  tags: readonly string[];
}

/**
 * Takes the outbox writers' lock, held until the transaction ends. Writers holding it commit one at a
 * time, in the order they took it, so a sequence value drawn after taking it (an outbox id, a ledger
 * row's number) becomes visible in sequence order: whoever sees a value also sees every smaller one.
 * `appendEvents` takes it; a transaction that draws such a value earlier takes it first.
 */
export async function lockCommitOrder(tx: Queryable): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [OUTBOX_LOCK]);
}

/**
 * Appends events inside the caller's transaction, so they exist exactly when the state change does,
 * and notifies listeners (PostgreSQL delivers NOTIFY on commit, never for a rolled-back transaction).
 * Call it last in a transaction: the lock it takes is held until commit.
 */
export async function appendEvents(tx: Queryable, events: readonly OutboxEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  // One statement, one round trip: the lock (`lockCommitOrder`'s, taken before any id is drawn: the rows
  // are made from the lock's row), the rows in the order given, and the notification of the last id.
  const res = await tx.query<{ id: string }>(
    `WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($1) AS held),
     appended AS (
       INSERT INTO outbox (topic, key, payload, audience, tags)
       SELECT e.topic, e.key, e.payload, e.audience, e.tags
       FROM locked, ROWS FROM (jsonb_to_recordset($2::jsonb) AS (topic text, key text, payload jsonb, audience jsonb, tags text[])) WITH ORDINALITY AS e(topic, key, payload, audience, tags, n)
       ORDER BY e.n
       RETURNING id
     ),
     notified AS MATERIALIZED (SELECT pg_notify($3, max(id)::text) FROM appended)
     SELECT appended.id::text AS id FROM appended, notified ORDER BY appended.id`,
    [
      OUTBOX_LOCK,
      JSON.stringify(events.map((e) => ({ topic: e.topic, key: e.key ?? null, payload: e.payload, audience: e.audience, tags: e.tags }))),
      OUTBOX_CHANNEL,
    ],
  );
  const ids = res.rows.map((r) => r.id);
  noteAppended(
    tx,
    events.flatMap((e) => e.tags),
    ids,
  );
  return ids;
}
