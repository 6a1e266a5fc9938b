import { domainError } from '../../platform/errors.js';
import type { Database, Queryable } from '../../platform/db.js';
import { appendEvents } from '../../platform/outbox.js';
import type { EntityType } from './frame.js';
import type { MachineEvent } from './offline.js';
import { materializationTags, type MaterializationRecord, type MaterializedViewRecord, type OnlineRow, type StoredOnlineRow } from './records.js';

/** All SQL of the features subgraph. */

/** The outbox topic of a committed materialization (no key; payload: its id and views). */
export const MATERIALIZED_TOPIC = 'features.materialized';

/** Serializes writers of the database online store: each replaces whole views. */
const ONLINE_LOCK = 7_231_004_411;

/**
 * The online store only moves forward: a materialization is refused (409, nothing written) when, for a view
 * it lists, its as_of is older than the one that view is served at, or it would leave a view that serves rows
 * with none. Views it does not list keep serving as they are. Read under the materialization lock, in the
 * transaction that records the new one.
 */
async function refuseRollback(tx: Queryable, m: Pick<MaterializationRecord, 'asOf' | 'views'>): Promise<void> {
  const served = await tx.query<{ view: string; as_of: Date | string; rows: number; id: string }>(
    `SELECT DISTINCT ON (v->>'view') v->>'view' AS view, m.as_of, (v->>'rowsWritten')::int AS rows, m.id::text AS id
     FROM features_materializations m CROSS JOIN LATERAL jsonb_array_elements(m.views) v
     WHERE v->>'view' = ANY($1::text[]) ORDER BY v->>'view', m.id DESC`,
    [m.views.map((v) => v.view)],
  );
  const problems: string[] = [];
  for (const s of served.rows) {
    const asOf = new Date(s.as_of);
    const next = m.views.find((v) => v.view === s.view)!;
    if (m.asOf.getTime() < asOf.getTime()) {
      problems.push(`${s.view} is served as of ${asOf.toISOString()} (materialization ${s.id}), newer than ${m.asOf.toISOString()}`);
    } else if (s.rows > 0 && next.rowsWritten === 0) {
      problems.push(`${s.view} serves ${s.rows} rows (materialization ${s.id}) and would be left with none`);
    }
  }
  if (problems.length > 0) {
    throw domainError(
      'CONFLICT',
      `The online store only moves forward: ${problems.join('; ')}. Materialize as of the served time or later; nothing was changed`,
    );
  }
}
const INSERT_BATCH = 5000;

type MaterializationRow = {
  id: string;
  as_of: Date | string;
  watermark: Date | string | null;
  rows_written: number;
  views: MaterializedViewRecord[];
  online_store: 'database' | 'redis';
  engine: string;
  milliseconds: number;
  materialized_at: Date | string;
};

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));

/** The key of an entity's rows in the in-memory copy of the online store. */
export const onlineKey = (entityType: EntityType, entityId: string) => `${entityType}:${entityId}`;

type OnlineRowRecord = {
  view: string;
  version: string;
  materialization_id: string;
  materialized_at: Date | string;
  as_of: Date | string;
  feature_ts: Date | string;
  vals: (number | null)[];
};

const storedRowOf = (r: OnlineRowRecord): StoredOnlineRow => ({
  view: r.view,
  version: r.version,
  materializationId: r.materialization_id,
  materializedAt: date(r.materialized_at),
  asOf: date(r.as_of),
  featureTs: date(r.feature_ts),
  values: r.vals,
});

function recordOf(r: MaterializationRow): MaterializationRecord {
  return {
    id: r.id,
    asOf: date(r.as_of),
    watermark: r.watermark === null ? null : date(r.watermark),
    rowsWritten: r.rows_written,
    views: r.views,
    onlineStore: r.online_store,
    engine: r.engine,
    milliseconds: r.milliseconds,
    materializedAt: date(r.materialized_at),
  };
}

const COLUMNS = 'id::text AS id, as_of, watermark, rows_written, views, online_store, engine, milliseconds, materialized_at';

export class FeaturesStore {
  constructor(readonly db: Database) {}

  /**
   * Records a materialization and, with the database as the online store, replaces the online rows of its
   * views, all in one transaction: a reader sees every row of the old materialization or of the new one.
   * `beforeCommit` runs inside the transaction with the new id (the Redis store swaps its pointer there, so
   * a failed swap records nothing).
   */
  async recordMaterialization(
    m: Omit<MaterializationRecord, 'id' | 'materializedAt'>,
    rows: readonly OnlineRow[] | null,
    materializedAt: Date,
    beforeCommit?: (id: string) => Promise<void>,
  ): Promise<MaterializationRecord> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [ONLINE_LOCK]);
      await refuseRollback(tx, m);
      const inserted = await tx.query<MaterializationRow>(
        `INSERT INTO features_materializations (as_of, watermark, rows_written, views, online_store, engine, milliseconds, materialized_at)
         VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
        [
          m.asOf.toISOString(),
          m.watermark?.toISOString() ?? null,
          m.rowsWritten,
          JSON.stringify(m.views),
          m.onlineStore,
          m.engine,
          m.milliseconds,
          materializedAt.toISOString(),
        ],
      );
      const record = recordOf(inserted.rows[0]!);
      if (rows)
        await replaceOnlineRows(
          tx,
          record.id,
          m.views.map((v) => v.view),
          rows,
        );
      if (beforeCommit) await beforeCommit(record.id);
      // Every instance's in-memory copy of the online rows reloads on this event (appended last: its lock
      // is held until commit).
      // A materialization changes what every caller is served: everyone's event. Its tags name the online rows
      // of its views wherever they live (with Redis, no online row is in the database).
      const views = m.views.map((v) => v.view);
      await appendEvents(tx, [
        { topic: MATERIALIZED_TOPIC, payload: { materializationId: record.id, views }, audience: 'everyone', tags: materializationTags(record.id, views) },
      ]);
      return record;
    });
  }

  /** The newest materialization into the given store, or null (what a lost online store should hold). */
  async lastMaterialization(onlineStore: 'database' | 'redis'): Promise<MaterializationRecord | null> {
    const res = await this.db.query<MaterializationRow>(
      `SELECT ${COLUMNS} FROM features_materializations WHERE online_store = $1 ORDER BY features_materializations.id DESC LIMIT 1`,
      [onlineStore],
    );
    return res.rows[0] ? recordOf(res.rows[0]) : null;
  }

  async materializations(first: number): Promise<MaterializationRecord[]> {
    const res = await this.db.query<MaterializationRow>(
      `SELECT ${COLUMNS} FROM features_materializations ORDER BY features_materializations.id DESC LIMIT $1`,
      [first],
    );
    return res.rows.map(recordOf);
  }

  /** Every online row of the database store, keyed `entity_type:entity_id`, each key's rows by view. */
  async allOnlineRows(): Promise<Map<string, StoredOnlineRow[]>> {
    const res = await this.db.query<OnlineRowRecord & { entity_type: string; entity_id: string }>(
      `SELECT o.entity_type, o.entity_id, o.view, o.version, o.materialization_id::text AS materialization_id, m.materialized_at, m.as_of, o.feature_ts, o.vals
       FROM features_online o JOIN features_materializations m ON m.id = o.materialization_id
       ORDER BY o.entity_type, o.entity_id, o.view`,
    );
    const out = new Map<string, StoredOnlineRow[]>();
    for (const r of res.rows) {
      const key = onlineKey(r.entity_type as EntityType, r.entity_id);
      let rows = out.get(key);
      if (!rows) out.set(key, (rows = []));
      rows.push(storedRowOf(r));
    }
    return out;
  }

  async onlineRows(entityType: EntityType, entityId: string): Promise<StoredOnlineRow[]> {
    const res = await this.db.query<OnlineRowRecord>(
      `SELECT o.view, o.version, o.materialization_id::text AS materialization_id, m.materialized_at, m.as_of, o.feature_ts, o.vals
       FROM features_online o JOIN features_materializations m ON m.id = o.materialization_id
       WHERE o.entity_type = $1 AND o.entity_id = $2 ORDER BY o.view`,
      [entityType, entityId],
    );
    return res.rows.map(storedRowOf);
  }

  /**
   * The rental machine status changes in the outbox, in commit order, each with the fleet utilization
   * of the fleet summary its transaction wrote next.
   */
  async machineEvents(): Promise<MachineEvent[]> {
    const res = await this.db.query<{ id: string; topic: string; payload: { machineId?: string; status?: string; at?: string; utilization?: number } }>(
      `SELECT id::text AS id, topic, payload FROM outbox
       WHERE topic IN ('rental.machine_status', 'rental.fleet_summary') ORDER BY outbox.id`,
    );
    const events: MachineEvent[] = [];
    let pending: MachineEvent[] = [];
    let utilization = 0;
    for (const row of res.rows) {
      const p = row.payload;
      if (row.topic === 'rental.fleet_summary') {
        utilization = typeof p.utilization === 'number' ? p.utilization : utilization;
        for (const e of pending) e.fleetUtilization = utilization;
        pending = [];
        continue;
      }
      if (typeof p.machineId !== 'string' || typeof p.at !== 'string') continue;
      if (p.status !== 'available' && p.status !== 'reserved' && p.status !== 'in_use') continue;
      const event: MachineEvent = { machineId: p.machineId, status: p.status, at: Date.parse(p.at), seq: Number(row.id), fleetUtilization: utilization };
      events.push(event);
      pending.push(event);
    }
    return events;
  }

  async ping(): Promise<boolean> {
    await this.db.query('SELECT 1 FROM features_materializations LIMIT 1');
    return true;
  }
}

async function replaceOnlineRows(tx: Queryable, materializationId: string, views: readonly string[], rows: readonly OnlineRow[]): Promise<void> {
  await tx.query('DELETE FROM features_online WHERE view = ANY($1::text[])', [views]);
  for (let i = 0; i < rows.length; i += INSERT_BATCH) {
    const batch = rows.slice(i, i + INSERT_BATCH).map((r) => ({
      entity_type: r.entityType,
      entity_id: r.entityId,
      view: r.view,
      version: r.version,
      feature_ts: new Date(r.featureTs).toISOString(),
      vals: r.values,
    }));
    await tx.query(
      `INSERT INTO features_online (entity_type, entity_id, view, materialization_id, version, feature_ts, vals)
       SELECT r.entity_type, r.entity_id, r.view, $2::bigint, r.version, r.feature_ts, r.vals
       FROM jsonb_to_recordset($1::jsonb) AS r(entity_type text, entity_id text, view text, version text, feature_ts timestamptz, vals jsonb)`,
      [JSON.stringify(batch), materializationId],
    );
  }
}
