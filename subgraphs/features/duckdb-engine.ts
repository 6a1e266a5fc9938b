import {
  DOUBLE,
  DuckDBDataChunk,
  DuckDBInstance,
  INTEGER,
  type DuckDBConnection,
  type DuckDBDoubleVector,
  type DuckDBIntegerVector,
  type DuckDBType,
} from '@duckdb/node-api';
import type { Availability, EntityType, LabelRows, Matches, ViewData } from './frame.js';

const CHUNK = 2048;
const IDENT = /^[a-z][a-z0-9_]*$/;

type Column = { name: string; type: 'int' | 'double'; get(i: number): number | null };

/**
 * The DuckDB engine: every feature view is a table (entity, ts, created, seq) and, made when it is loaded, its
 * deduplicated table keeping per (entity, feature_timestamp) only the row with the latest created_timestamp
 * (then the greatest seq), and its as-known table (below); a join loads the label rows into a temporary table
 * of its own connection and runs one SQL statement, `ASOF LEFT JOIN` per view on the deduplicated table
 * (EVENT_TIME) or on the as-known table (AS_KNOWN), with the TTL applied to the matched row. Answers, per
 * view, the matched row's seq.
 */
export class DuckDbEngine {
  private constructor(
    /** The in-memory database (also used to read and write the world's Parquet files). */
    readonly instance: DuckDBInstance,
    private readonly views: Map<string, ViewData>,
  ) {}

  static async open(views: readonly ViewData[], options: { threads?: number } = {}): Promise<DuckDbEngine> {
    const instance = await DuckDBInstance.create(':memory:', { threads: String(options.threads ?? 2) });
    const engine = new DuckDbEngine(instance, new Map());
    for (const view of views) await engine.load(view);
    return engine;
  }

  /** Loads (or replaces) one view's rows. */
  async load(view: ViewData): Promise<void> {
    if (!IDENT.test(view.name)) throw new Error(`view name ${view.name} is not an identifier`);
    const conn = await this.instance.connect();
    try {
      await conn.run(`CREATE OR REPLACE TABLE fv_${view.name} (entity INTEGER, ts DOUBLE, created DOUBLE, seq INTEGER)`);
      await appendColumns(conn, `fv_${view.name}`, view.length, [
        { name: 'entity', type: 'int', get: (i) => view.entityCode[i]! },
        { name: 'ts', type: 'double', get: (i) => view.ts[i]! },
        { name: 'created', type: 'double', get: (i) => view.created[i]! },
        { name: 'seq', type: 'int', get: (i) => i },
      ]);
      // The dedup does not depend on the label rows: done once per loaded view, not per join.
      await conn.run(DuckDbEngine.dedupSql(view.name));
      await conn.run(DuckDbEngine.asKnownSql(view.name));
    } finally {
      conn.closeSync();
    }
    this.views.set(view.name, view);
  }

  /**
   * Per view, one row per (entity, feature_timestamp): the latest created_timestamp, then the greatest seq
   * (ASOF alone would pick an arbitrary row among equal timestamps). Run when the view is loaded.
   */
  static dedupSql(view: string): string {
    return `CREATE OR REPLACE TABLE fd_${view} AS SELECT entity, ts, seq FROM fv_${view}
      QUALIFY row_number() OVER (PARTITION BY entity, ts ORDER BY created DESC, seq DESC) = 1`;
  }

  /**
   * Per view, for AS_KNOWN: a row may serve an event at t once t >= known = max(ts, created) (it is valid and
   * has been written). Ordered by known, each entity's running greatest (ts, created, seq) is the answer for
   * any t from that known on; ASOF on known then finds it. The frame takes every row with the same known
   * (RANGE), so all of them carry the same answer and one per (entity, known) is kept.
   */
  static asKnownSql(view: string): string {
    return `CREATE OR REPLACE TABLE fk_${view} AS SELECT entity, known, best.ts AS ts, best.seq AS seq FROM (
      SELECT entity, greatest(ts, created) AS known,
        max({ts: ts, created: created, seq: seq}) OVER (PARTITION BY entity ORDER BY greatest(ts, created) RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS best
      FROM fv_${view})
      QUALIFY row_number() OVER (PARTITION BY entity, known ORDER BY seq) = 1`;
  }

  /** The SQL of one join over the deduplicated (or as-known) views (documented in docs/features.md). */
  static sql(views: readonly { name: string; entity: EntityType; ttlMs: number | null }[], labelTable: string, availability: Availability): string {
    const selects = views.map((v, i) => (v.ttlMs === null ? `d${i}.seq AS m${i}` : `CASE WHEN d${i}.ts >= l.ts - ${v.ttlMs} THEN d${i}.seq END AS m${i}`));
    const joins = views.map((v, i) =>
      availability === 'AS_KNOWN'
        ? `ASOF LEFT JOIN fk_${v.name} d${i} ON l.${v.entity} = d${i}.entity AND l.ts >= d${i}.known`
        : `ASOF LEFT JOIN fd_${v.name} d${i} ON l.${v.entity} = d${i}.entity AND l.ts >= d${i}.ts`,
    );
    return `SELECT l.row_id, ${selects.join(', ')}
      FROM ${labelTable} l
      ${joins.join('\n      ')}`;
  }

  /** Joins the label rows with each named view; `ttl` overrides a view's TTL (null: none). */
  async join(
    viewNames: readonly string[],
    labels: LabelRows,
    availability: Availability,
    ttl: ReadonlyMap<string, number | null> = new Map(),
  ): Promise<Map<string, Matches>> {
    const views = viewNames.map((name) => {
      const view = this.views.get(name);
      if (!view) throw new Error(`view ${name} is not loaded`);
      const ttlMs = ttl.has(name) ? ttl.get(name)! : view.ttlMs;
      if (ttlMs !== null && !Number.isSafeInteger(ttlMs)) throw new Error(`TTL of ${name} is not a whole number of ms`);
      return { name, entity: view.entity, ttlMs };
    });
    const conn = await this.instance.connect();
    try {
      await conn.run('CREATE TEMP TABLE labels (row_id INTEGER, ts DOUBLE, policy INTEGER, claim INTEGER, machine INTEGER)');
      const key = (k: Int32Array) => (i: number) => (k[i]! < 0 ? null : k[i]!);
      await appendColumns(conn, 'labels', labels.length, [
        { name: 'row_id', type: 'int', get: (i) => i },
        { name: 'ts', type: 'double', get: (i) => labels.ts[i]! },
        { name: 'policy', type: 'int', get: key(labels.keys.policy) },
        { name: 'claim', type: 'int', get: key(labels.keys.claim) },
        { name: 'machine', type: 'int', get: key(labels.keys.machine) },
      ]);
      const result = await conn.run(DuckDbEngine.sql(views, 'labels', availability));
      const out = views.map(() => new Int32Array(labels.length).fill(-1));
      for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        const rowIds = chunk.getColumnVector(0) as DuckDBIntegerVector;
        for (let v = 0; v < views.length; v++) {
          const seqs = chunk.getColumnVector(v + 1) as DuckDBIntegerVector;
          const target = out[v]!;
          for (let r = 0; r < chunk.rowCount; r++) {
            const seq = seqs.getItem(r);
            if (seq !== null) target[rowIds.getItem(r)!] = seq;
          }
        }
      }
      return new Map(views.map((v, i) => [v.name, out[i]!]));
    } finally {
      conn.closeSync();
    }
  }

  /** A trivial query: the engine answers (health). */
  async ping(): Promise<boolean> {
    const conn = await this.instance.connect();
    try {
      const reader = await conn.runAndReadAll('SELECT 1 AS ok');
      return reader.getRows()[0]?.[0] === 1;
    } finally {
      conn.closeSync();
    }
  }

  close(): void {
    this.instance.closeSync();
  }
}

/** Appends `length` rows column by column through data chunks (one typed-array copy per vector). */
async function appendColumns(conn: DuckDBConnection, table: string, length: number, columns: readonly Column[]): Promise<void> {
  const appender = await conn.createAppender(table);
  const types: DuckDBType[] = columns.map((c) => (c.type === 'int' ? INTEGER : DOUBLE));
  try {
    for (let offset = 0; offset < length; offset += CHUNK) {
      const n = Math.min(CHUNK, length - offset);
      const chunk = DuckDBDataChunk.create(types, n);
      columns.forEach((column, c) => {
        const vector = chunk.getColumnVector(c) as DuckDBIntegerVector | DuckDBDoubleVector;
        for (let r = 0; r < n; r++) vector.setItem(r, column.get(offset + r));
        vector.flush();
      });
      appender.appendDataChunk(chunk);
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
}
