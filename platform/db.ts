import type { ClientConfig, CustomTypesConfig, Pool, PoolClient } from 'pg';
import { lockDataDir } from './data-dir-lock.js';
import { classifyDatabaseError, connectivityFailure, DatabaseUnavailableError, guarded, redactDatabaseUrl } from './db-errors.js';
import type { PlatformConfig } from './config.js';
import type { QueryResult } from './query-result.js';
import { INT8_OID, parseInt8 } from './int8.mjs';
import { seedFromCluster } from './pglite-cluster.js';
import { PgListener, type Pg } from './pg-listener.js';
import { PgliteThread } from './pglite-thread.js';
import { ReadCache } from './read-cache.js';
import { StartupError } from './startup-error.js';

/** Anything SQL can be sent to: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** Transactions retried so far, by cause. */
interface RetryCounts {
  /** After a deadlock (40P01): the lock order of some transaction is not consistent. */
  readonly deadlock: number;
  /** After a serialization failure (40001). */
  readonly serialization: number;
}

export interface Database extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /**
   * Runs `fn` in one transaction (READ COMMITTED), committing when it resolves and rolling back when it
   * throws. On PostgreSQL a deadlock or serialization failure retries the whole function.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Live retry counters (always zero on PGlite, which runs one transaction at a time). */
  readonly retries: RetryCounts;
  /** Runs a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
  /** PGlite with its read cache (platform/read-cache.ts): cacheable reads answered from it or run, answers kept; null otherwise. */
  readCacheStats(): { hits: number; misses: number; entries: number } | null;
  /** PostgreSQL: the pool's connections (open, idle) and the queries waiting for one; null on PGlite. */
  poolStats(): { total: number; idle: number; waiting: number } | null;
  /** Subscribes to NOTIFY on a channel; resolves to an unsubscribe function. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** PostgreSQL connection string; without it, PGlite is used. */
  url?: string | undefined;
  /** PGlite data directory; undefined keeps the database in memory. */
  dataDir?: string | undefined;
  /** PostgreSQL schema to work in (created when missing); lets tests share one server. */
  schema?: string | undefined;
  /** Pool size for PostgreSQL. @default 10 */
  poolSize?: number;
  /**
   * PostgreSQL: how long a query may wait for a connection (a new one being made, or a free one of the
   * pool) before it fails as unavailable. @default 10000
   */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL: longest a statement runs on the server (`statement_timeout`), and a query waits for its
   * answer on the client (a server that accepts connections but never answers), before it fails as
   * unavailable. @default 15000
   */
  queryTimeoutMs?: number;
  /**
   * PGlite: answer repeated reads from memory until the next write (platform/read-cache.ts). Rows of a
   * read are then frozen and shared by its callers. @default true
   */
  readCache?: boolean;
}

/** Opens the database the subgraphs run on: DATABASE_URL, or PGlite under DATA_DIR (in memory for `:memory:`). */
export function openRuntimeDatabase(config: PlatformConfig): Promise<Database> {
  return openDatabase({
    url: config.DATABASE_URL,
    dataDir: config.DATA_DIR === ':memory:' ? undefined : config.DATA_DIR,
    schema: config.DATABASE_SCHEMA,
    queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT_MS,
    readCache: config.EMBEDDED_READ_CACHE,
  });
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.url ? openPostgres(options.url, options) : openPglite(options.dataDir, options.readCache ?? true);
}

/**
 * The embedded database, on a thread of its own (platform/pglite-thread.ts). A data directory has one
 * writer: its lock is taken before PGlite opens it and released after PGlite has closed it. Every call
 * fails as DatabaseUnavailableError once PGlite is closed, or its thread stopped.
 */
async function openPglite(dataDir: string | undefined, readCache: boolean): Promise<Database> {
  const lock = dataDir ? await lockDataDir(dataDir) : null;
  let db: PgliteThread;
  try {
    if (dataDir) seedFromCluster(dataDir);
    db = await PgliteThread.open(dataDir);
  } catch (error) {
    lock?.release();
    throw error;
  }
  const toResult = <R>(res: { rows: R[]; affectedRows: number }): QueryResult<R> => ({
    rows: res.rows,
    // PGlite reports affectedRows 0 for a SELECT, and no rows for an UPDATE without RETURNING.
    rowCount: Math.max(res.rows.length, res.affectedRows),
  });
  const cache = readCache ? new ReadCache() : null;
  /** Runs a statement that may change the data: nothing read before it, or while it ran, is kept. */
  const writing = async <T>(run: () => Promise<T>): Promise<T> => {
    cache?.changed();
    try {
      return await run();
    } finally {
      cache?.changed();
    }
  };
  const run = async <R>(sql: string, params?: readonly unknown[]) => toResult(await guarded(() => db.query<R>(sql, params ? [...params] : undefined)));
  return {
    kind: 'pglite',
    poolStats: () => null,
    readCacheStats: () => (cache ? { hits: cache.hits, misses: cache.misses, entries: cache.size } : null),
    retries: { deadlock: 0, serialization: 0 },
    async query<R>(sql: string, params?: readonly unknown[]) {
      // A closed database answers nothing, not even what it answered before.
      if (!cache || db.closed) return run<R>(sql, params);
      const statement = cache.classify(sql, params);
      if (statement.kind === 'write') return writing(() => run<R>(sql, params));
      if (statement.kind === 'volatile') return run<R>(sql, params);
      const kept = cache.get<R>(statement.key);
      if (kept) return kept;
      const token = cache.begin();
      return cache.put(statement.key, token, await run<R>(sql, params));
    },
    // PGlite runs one connection: transactions are serialized, never concurrent.
    transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      return writing(() =>
        guarded(() =>
          db.transaction((query) =>
            fn({
              async query<R>(sql: string, params?: readonly unknown[]) {
                return toResult(await guarded(() => query<R>(sql, params ? [...params] : undefined)));
              },
            }),
          ),
        ),
      );
    },
    async exec(sql: string) {
      await writing(() => guarded(() => db.exec(sql)));
    },
    async listen(channel, onPayload) {
      const stop = await guarded(() => db.listen(channel, onPayload));
      // Once the database is closed there is nothing left to stop listening to.
      return async () => (db.closed ? undefined : guarded(() => stop()));
    },
    async close() {
      try {
        await db.close();
      } finally {
        lock?.release();
      }
    },
  };
}

const RETRYABLE = new Map<string | undefined, keyof RetryCounts>([
  ['40001', 'serialization'],
  ['40P01', 'deadlock'],
]);

/**
 * A start that cannot reach the server names it, without its password: `cannot reach DATABASE_URL
 * postgres://app:***@db:5432/ops: connection refused`.
 */
function startupFailure(url: string, error: unknown): StartupError {
  const reason = connectivityFailure(error);
  const where = `DATABASE_URL ${redactDatabaseUrl(url)}`;
  if (reason) return new StartupError(`cannot reach ${where}: ${reason}`, { cause: error });
  // The server answered but refused (authentication, unknown database): its message names no secret.
  const message = error instanceof Error ? error.message.split('\n')[0]!.replaceAll(url, redactDatabaseUrl(url)) : String(error);
  return new StartupError(`cannot use ${where}: ${message}`, { cause: error });
}

/**
 * PostgreSQL at `url`: a pool of connections for queries and transactions, and one more connection for
 * LISTEN (platform/pg-listener.ts), opened with the first channel listened to.
 */
async function openPostgres(url: string, options: DatabaseOptions): Promise<Database> {
  // The driver loads only for PostgreSQL: an embedded start does not pay for it.
  const { default: pg } = await import('pg');
  const schema = options.schema;
  if (schema !== undefined && !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  if (schema) await createSchema(pg, url, schema, connectTimeoutMs);
  const connection = connectionConfig(pg, url, schema, connectTimeoutMs, options.queryTimeoutMs ?? 15_000);
  const pool = await openPool(pg, url, connection, options.poolSize ?? 10);
  const notifications = new PgListener(pg, connection);
  const retries = { deadlock: 0, serialization: 0 };
  return {
    kind: 'postgres',
    retries,
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    readCacheStats: () => null,
    query: (sql, params) => runOn(pool, sql, params),
    transaction: (fn) => retriedTransaction(pool, fn, retries),
    async exec(sql: string) {
      await runOn(pool, sql);
    },
    listen: (channel, onPayload) => notifications.listen(channel, onPayload),
    async close() {
      await notifications.close();
      await pool.end();
    },
  };
}

/** Creates the schema a database works in when it is missing, on a connection of its own. */
async function createSchema(pg: Pg, url: string, schema: string, connectTimeoutMs: number): Promise<void> {
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs });
  try {
    await admin.connect();
  } catch (error) {
    await admin.end().catch(() => undefined);
    throw startupFailure(url, error);
  }
  try {
    await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  } finally {
    await admin.end();
  }
}

/** What every connection is opened with: the pool's and the LISTEN connection's. */
function connectionConfig(pg: Pg, url: string, schema: string | undefined, connectTimeoutMs: number, queryTimeoutMs: number): ClientConfig {
  const types: CustomTypesConfig = {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
      oid === INT8_OID && format !== 'binary'
        ? parseInt8
        : (pg.types.getTypeParser(oid, format) as (value: string) => unknown)) as CustomTypesConfig['getTypeParser'],
  };
  return {
    connectionString: url,
    types,
    connectionTimeoutMillis: connectTimeoutMs,
    // The server cancels a statement at the limit (57014, a SQL error of its own); the client gives up a
    // little later on an answer that never comes (a stalled network, a hung server), and the pool then
    // discards that connection.
    statement_timeout: queryTimeoutMs,
    query_timeout: queryTimeoutMs + 1000,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  };
}

/** Opens the pool and checks with one query that the server answers; a start that cannot use it fails. */
async function openPool(pg: Pg, url: string, connection: ClientConfig, size: number): Promise<Pool> {
  const pool = new pg.Pool({ ...connection, max: size });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it on the next checkout.
  });
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw startupFailure(url, error);
  }
  return pool;
}

/** Runs one statement on the pool or a checked-out connection, its errors classified. */
async function runOn<R>(client: Pool | PoolClient, sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
  const res = await guarded(() => client.query(sql, params ? [...params] : undefined));
  return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
}

/**
 * Runs `fn` in one transaction on a connection of the pool; after a deadlock or serialization failure the
 * whole function runs again, up to five attempts in all, each retry counted in `retries` by its cause.
 */
async function retriedTransaction<T>(pool: Pool, fn: (tx: Queryable) => Promise<T>, retries: Record<keyof RetryCounts, number>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await guarded(() => pool.connect());
    let lost = false;
    // The pool listens for errors on idle clients only: a connection reset while this transaction
    // awaits something else between statements would otherwise be an uncaught 'error'. The next
    // statement fails on the dead connection and is classified there.
    const onLost = () => {
      lost = true;
    };
    client.on('error', onLost);
    try {
      await runOn(client, 'BEGIN');
      const result = await fn({ query: (sql, params) => runOn(client, sql, params) });
      await runOn(client, 'COMMIT');
      return result;
    } catch (error) {
      const classified = classifyDatabaseError(error);
      lost = classified instanceof DatabaseUnavailableError;
      if (!lost) await client.query('ROLLBACK').catch(() => undefined);
      const cause = RETRYABLE.get((error as { code?: string }).code);
      if (cause && attempt < 5) {
        retries[cause]++;
        continue;
      }
      // A lost connection is not retried: whether a COMMIT in flight took effect cannot be known.
      throw classified;
    } finally {
      // A connection that failed is discarded, not handed to the next transaction.
      client.off('error', onLost);
      client.release(lost || undefined);
    }
  }
}

/** Closes a database whose opening was started and not handed on (a start that failed first); an opening that failed has nothing to close. */
export async function closeOpening(opening: Promise<Database> | undefined): Promise<void> {
  await (await opening?.catch(() => null))?.close();
}
