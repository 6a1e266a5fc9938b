import type { Database, Queryable } from './db.js';

/*
 * The outbox is the event log, and it is bounded: every event is kept for OUTBOX_RETENTION_S (7 days by
 * default, as the stream's EVENT_STREAM_MAX_AGE_S) and in any case until it is relayed to the event bus.
 * High-rate topics keep less, declared beside the subgraph that writes them (`retention` in its module): a
 * shorter age, or only the newest event per key of some kind after a while. Pruning runs in batches of
 * short transactions (no long lock on the outbox), one process at a time (an advisory lock per batch), and
 * records each topic's horizon, so a resume cursor below it is answered CURSOR_EXPIRED, never with a gap.
 */

/** What one topic keeps beyond the shared age limit. */
export interface TopicRetention {
  topic: string;
  /** Events of the topic older than this are pruned (shorter than OUTBOX_RETENTION_S). */
  maxAgeS?: number;
  /**
   * After this many seconds, events matching `compactWhere` are pruned but for the newest of each key (a
   * position superseded by a newer position): what a dashboard resuming from then needs is the newest.
   */
  compact?: { afterS: number; where: CompactPredicate };
}

/** The events a compaction prunes, as a SQL condition on the outbox row `o` (its `payload`). */
type CompactPredicate = `o.payload->>'${string}' = '${string}'`;

export interface PruneOptions {
  /** OUTBOX_RETENTION_S */
  retentionS: number;
  policies: readonly TopicRetention[];
  /** Only events at or below this id may go (the relay's position; null: no event bus, all relayed). */
  relayedThrough(): Promise<bigint | null>;
  /** Rows per transaction. @default 5000 */
  batch?: number;
}

export interface PruneResult {
  pruned: number;
  byTopic: Record<string, number>;
  /** Whether another process held the pruning lock (this run did nothing). */
  busy: boolean;
}

const PRUNE_LOCK = 7_231_004_118;

/** Prunes what the policies allow, batch after batch, until nothing more is due. */
export async function pruneOutbox(db: Database, options: PruneOptions): Promise<PruneResult> {
  const batch = options.batch ?? 5000;
  const relayed = await options.relayedThrough();
  const limit = relayed === null ? '9223372036854775807' : relayed.toString();
  const result: PruneResult = { pruned: 0, byTopic: {}, busy: false };
  const steps: { horizon: string; select: string; params: unknown[] }[] = [
    // Every topic: the shared age limit.
    {
      horizon: '*',
      select: `SELECT o.id, o.topic FROM outbox o WHERE o.id <= $1::bigint AND o.created_at < now() - make_interval(secs => $2::double precision) ORDER BY o.id LIMIT $3`,
      params: [limit, options.retentionS, batch],
    },
  ];
  for (const policy of options.policies) {
    if (policy.maxAgeS !== undefined) {
      steps.push({
        horizon: policy.topic,
        select: `SELECT o.id, o.topic FROM outbox o WHERE o.topic = $4 AND o.id <= $1::bigint AND o.created_at < now() - make_interval(secs => $2::double precision) ORDER BY o.id LIMIT $3`,
        params: [limit, policy.maxAgeS, batch, policy.topic],
      });
    }
    if (policy.compact) {
      const newer = policy.compact.where.replaceAll('o.payload', 'n.payload');
      steps.push({
        horizon: policy.topic,
        select: `SELECT o.id, o.topic FROM outbox o WHERE o.topic = $4 AND o.id <= $1::bigint AND o.created_at < now() - make_interval(secs => $2::double precision)
                   AND ${policy.compact.where}
                   AND EXISTS (SELECT 1 FROM outbox n WHERE n.topic = o.topic AND n.key = o.key AND n.id > o.id AND ${newer})
                 ORDER BY o.id LIMIT $3`,
        params: [limit, policy.compact.afterS, batch, policy.topic],
      });
    }
  }
  for (const step of steps) {
    for (;;) {
      const done = await db.transaction(async (tx) => {
        const locked = await tx.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [PRUNE_LOCK]);
        if (!locked.rows[0]?.ok) return null;
        const deleted = await tx.query<{ id: string; topic: string }>(
          `WITH doomed AS (${step.select}) DELETE FROM outbox d USING doomed WHERE d.id = doomed.id RETURNING d.id::text AS id, d.topic`,
          step.params,
        );
        if (deleted.rows.length > 0) await raiseHorizon(tx, step.horizon, deleted.rows);
        return deleted.rows;
      });
      if (done === null) {
        result.busy = true;
        return result;
      }
      result.pruned += done.length;
      for (const row of done) result.byTopic[row.topic] = (result.byTopic[row.topic] ?? 0) + 1;
      if (done.length < batch) break;
    }
  }
  return result;
}

async function raiseHorizon(tx: Queryable, horizon: string, rows: readonly { id: string }[]): Promise<void> {
  let max = 0n;
  for (const r of rows) if (BigInt(r.id) > max) max = BigInt(r.id);
  await tx.query(
    `INSERT INTO outbox_horizon (topic, pruned_through) VALUES ($1, $2::bigint)
     ON CONFLICT (topic) DO UPDATE SET pruned_through = GREATEST(outbox_horizon.pruned_through, EXCLUDED.pruned_through)`,
    [horizon, max.toString()],
  );
}

/** The newest pruned id of a topic (0: nothing pruned): cursors below it are expired. */
export async function outboxHorizon(db: Queryable, topic: string): Promise<bigint> {
  const res = await db.query<{ through: string | null }>(`SELECT max(pruned_through)::text AS through FROM outbox_horizon WHERE topic IN ($1, '*')`, [topic]);
  return BigInt(res.rows[0]?.through ?? '0');
}
