import type { QueryResult } from './query-result.js';

/*
 * Answers of reads on the embedded database (PGlite), kept until the next write.
 *
 * A PGlite data directory has exactly one writer: this process, through one Database object (the
 * directory is locked, and an in-memory database has no other handle). So the data can only change by a
 * statement sent through that object, and the cache is cleared exactly then: before and after every
 * transaction, script and statement that is not a plain read. Between two writes, a read whose answer
 * depends only on the stored data (no clock, no randomness, no sequence, no locks) gives the same rows
 * every time, and is answered from here without running the statement again. A read that was running
 * when a write began is not kept, since it may have seen the data before the write.
 *
 * PostgreSQL never uses it: other processes write to the same database.
 */

/**
 * Statements that write, lock or have an effect: anything but a plain read, and the functions that
 * advance sequences, take advisory locks, notify or change settings. The cache is cleared around them.
 */
const WRITES =
  /\b(insert|update|delete|merge|into|notify|listen|unlisten|lock|for\s+(update|share|no\s+key\s+update|key\s+share)|nextval|setval|set_config|pg_\w+|txid_\w+)\b/i;

/** Reads whose answer depends on more than the data: the clock, random numbers, the session. */
const VOLATILE =
  /\b(now|current_date|current_time|current_timestamp|current_user|current_schema|current_setting|localtime|localtimestamp|clock_timestamp|statement_timestamp|transaction_timestamp|timeofday|age|random|setseed|gen_random_uuid|uuid_generate_\w+|currval|lastval)\b/i;

const READ = /^\s*(select|with|values|table)\b/i;

/** What a statement is to the cache. */
export type Statement =
  /** Changes (or may change) the data: the cache is dropped before and after it. */
  | { kind: 'write' }
  /** A read that must run every time, and is not kept. */
  | { kind: 'volatile' }
  /** A read answered from the cache under `key`. */
  | { kind: 'read'; key: string };

export interface ReadCacheOptions {
  /** Most answers kept; the whole cache is dropped when one more would exceed it. @default 2000 */
  maxEntries?: number;
  /** Answers with more rows are not kept. @default 5000 */
  maxRows?: number;
  /** Most rows kept over all answers; the whole cache is dropped when one more answer would exceed it. @default 100000 */
  maxKeptRows?: number;
}

export class ReadCache {
  private readonly answers = new Map<string, QueryResult<unknown>>();
  private generation = 0;
  private readonly maxEntries: number;
  private readonly maxRows: number;
  private readonly maxKeptRows: number;
  private keptRows = 0;
  /** Cacheable reads answered from the cache (hits) and run (misses); volatile reads and writes are not counted. */
  hits = 0;
  misses = 0;

  constructor(options: ReadCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 2000;
    this.maxRows = options.maxRows ?? 5000;
    this.maxKeptRows = options.maxKeptRows ?? 100_000;
  }

  /** How the cache treats a statement with these parameters. */
  classify(sql: string, params: readonly unknown[] | undefined): Statement {
    if (!READ.test(sql) || WRITES.test(sql)) return { kind: 'write' };
    if (VOLATILE.test(sql)) return { kind: 'volatile' };
    if (!params || params.length === 0) return { kind: 'read', key: sql };
    for (const p of params) {
      // Only values with one exact text form. A Date is not a key: it is nearly always the clock's now,
      // a read that would never be asked again and would only push others out.
      if (!(p === null || typeof p === 'string' || typeof p === 'number' || typeof p === 'boolean' || isPlainArray(p))) return { kind: 'volatile' };
    }
    return { kind: 'read', key: `${sql}\u0000${JSON.stringify(params)}` };
  }

  /**
   * The kept answer of `key`. Each caller gets rows of its own (a caller may add to a row: the subgraph
   * library sets `__typename` on an entity); what the rows hold (arrays, JSON values) is frozen and shared.
   */
  get<R>(key: string): QueryResult<R> | undefined {
    const hit = this.answers.get(key) as QueryResult<R> | undefined;
    if (!hit) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    return copyOf(hit);
  }

  /** A token to pass to `put`: the answer is kept only if no write began or ended in between. */
  begin(): number {
    return this.generation;
  }

  /** Keeps the answer of a read that began at `token` (unless a write began since); returns the caller's copy. */
  put<R>(key: string, token: number, result: QueryResult<R>): QueryResult<R> {
    if (token !== this.generation || result.rows.length > this.maxRows) return result;
    for (const row of result.rows) deepFreeze(row);
    if (this.answers.size >= this.maxEntries || this.keptRows + result.rows.length > this.maxKeptRows) this.drop();
    this.answers.set(key, result);
    this.keptRows += result.rows.length;
    return copyOf(result);
  }

  /** A write begins or ends: everything kept may be out of date. */
  changed(): void {
    this.generation++;
    this.drop();
  }

  private drop(): void {
    this.answers.clear();
    this.keptRows = 0;
  }

  get size(): number {
    return this.answers.size;
  }
}

const copyOf = <R>(result: QueryResult<R>): QueryResult<R> => ({
  rows: result.rows.map((row) => (typeof row === 'object' && row !== null ? { ...row } : row)),
  rowCount: result.rowCount,
});

/** Freezes a value and everything it holds (a Date's time cannot be frozen, and nothing here sets it). */
function deepFreeze(value: unknown): void {
  // A typed array's elements cannot be frozen (bytea columns): it is left as it is.
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
}

const isPlainArray = (value: unknown): boolean =>
  Array.isArray(value) && value.every((v) => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean');
