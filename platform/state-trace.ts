import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database, Queryable } from './db.js';

/*
 * What a subgraph request read and wrote of the state, so the gateway can keep its answers and drop them
 * exactly when a write touches what they read (gateway/sources/state-cache.ts).
 *
 * A subgraph declares its state tables (`SubgraphModule.state`): the type each table's rows are and who may
 * see them. Its database handle (`traceStateAccess`) watches every statement:
 * - a read inside a request depends on each state table it names: on the whole collection (the tag `Type`)
 *   unless the code that reads said which rows it reads (`readingOnly(['Type:key'], …)`, beside the query);
 *   a read of a table of the subgraph that is not declared leaves the answer uncacheable;
 * - a write to a state table is refused unless its transaction appends an event tagged with the table's
 *   collection (platform/outbox.ts, `OutboxEvent.tags`), so every gateway's cache hears of it from the event
 *   log, whoever made it; a write that changes nothing any read returns says so (`unobservedWrite`);
 * - after a commit that appended events, the request learns the log position of its write and the tags it
 *   changed, which the gateway answers with (read-your-writes).
 * State that changes with time alone: a request whose resolvers read the clock (`now` on a subgraph
 * context) keeps its answer only as long as the code that read it says it holds (`validUntil`); a read
 * that says nothing is not kept.
 */

/** Who may see a table's rows: anyone, the owner's tenant, or the owning principal alone. */
export type StateGrain = 'everyone' | 'tenant' | 'principal';

interface StateTable {
  /** The type its rows are: the collection tag, and the prefix of its key and owner tags. */
  readonly type: string;
  readonly grain: StateGrain;
}

/** A subgraph's state tables, by table name. */
export type StateTables = Readonly<Record<string, StateTable>>;

/** Tags: a collection (`Machine`), one row (`Machine:M-1`) or one owner's rows (`Booking@tenant-a`). */
export const stateTag = {
  collection: (type: string) => type,
  key: (type: string, key: string) => `${type}:${key}`,
  owner: (type: string, tenant: string) => `${type}@${tenant}`,
};

/** A well-formed tag: a type name, then optionally `:key` or `@tenant` (no spaces, at most 200 characters). */
export const STATE_TAG = /^[A-Z][A-Za-z0-9]{0,63}(?:[:@][!-~\u00a1-\uffff]{1,200})?$/;

/** The type a tag belongs to. */
export const typeOfTag = (tag: string): string => /^[A-Za-z0-9]+/.exec(tag)?.[0] ?? tag;

const GRAIN_ORDER: Record<StateGrain, number> = { everyone: 0, tenant: 1, principal: 2 };

/** What one request did to the state: the answer's dependencies and its write. */
export class StateTrace {
  /** The tags the answer depends on. */
  readonly tags = new Set<string>();
  /** Why the answer must not be kept (a table not declared, the clock read with no bound); null when it may. */
  uncacheable: string | null = null;
  /** The finest grain of the rows it read: who else may be served the same answer. */
  grain: StateGrain = 'everyone';
  /** Until when (epoch ms) the answer holds, when the code that read the clock said. */
  validUntil: number | null = null;
  /** A resolver read the clock. */
  clockRead = false;
  /** The newest log position this request's writes appended, and the tags they carried. */
  written: { position: bigint; tags: Set<string> } | null = null;
  /** The identity of the database it read or wrote (platform/database-identity.ts): whose event log tells of its writes. */
  lineage: string | null = null;

  refuse(reason: string): void {
    this.uncacheable ??= reason;
  }

  widen(grain: StateGrain): void {
    if (GRAIN_ORDER[grain] > GRAIN_ORDER[this.grain]) this.grain = grain;
  }

  /** Why the answer cannot be kept, or null: the clock read without a bound counts. */
  verdict(): string | null {
    if (this.uncacheable) return this.uncacheable;
    if (this.clockRead && this.validUntil === null) return 'read the clock without saying until when its answer holds';
    return null;
  }
}

interface Scope {
  trace: StateTrace;
  /** Types whose rows the code running now said it reads one by one (their tags are in the trace). */
  narrowed: ReadonlySet<string> | null;
  unobserved: boolean;
}

const scopes = new AsyncLocalStorage<Scope>();

/** Runs `fn` as one subgraph request whose state access `trace` records. */
export function traceRequest<T>(trace: StateTrace, fn: () => T): T {
  return scopes.run({ trace, narrowed: null, unobserved: false }, fn);
}

/** The trace of the request running now, if any. */
export const currentTrace = (): StateTrace | undefined => scopes.getStore()?.trace;

/**
 * Runs the reads in `fn` as depending on `tags` alone for the types they name: `readingOnly([stateTag.key('Machine', id)], …)`
 * says the statements inside read those machines and no other (a write to another machine leaves the answer kept).
 */
export async function readingOnly<T>(tags: readonly string[], fn: () => Promise<T>): Promise<T> {
  const scope = scopes.getStore();
  if (!scope) return fn();
  for (const tag of tags) scope.trace.tags.add(tag);
  const narrowed = new Set(scope.narrowed ?? []);
  for (const tag of tags) narrowed.add(typeOfTag(tag));
  return scopes.run({ ...scope, narrowed }, fn);
}

/** Says the answer being made holds until `at` (a quote's expiry), whatever the clock does before. */
export function validUntil(at: Date | number | null): void {
  const trace = currentTrace();
  if (!trace) return;
  const ms = at === null ? Number.POSITIVE_INFINITY : typeof at === 'number' ? at : at.getTime();
  trace.validUntil = trace.validUntil === null ? ms : Math.min(trace.validUntil, ms);
}

/** Runs `fn`, whose writes change nothing any read returns (a lease, a signing key): they need no event. */
export function unobservedWrite<T>(fn: () => Promise<T>): Promise<T> {
  const scope = scopes.getStore();
  return scopes.run({ trace: scope?.trace ?? new StateTrace(), narrowed: scope?.narrowed ?? null, unobserved: true }, fn);
}

/**
 * Makes a subgraph context note, in the request's trace, every read of what an answer may depend on beyond
 * the tables: `now` (one instant per request: the answer then holds only as long as the code says) and
 * `principal` (the caller: the answer is then kept for that principal alone). Called on each subgraph
 * context as it is made (platform/subgraph.ts).
 */
export function watchContext<C>(context: C): C {
  const holder = context as Record<string, unknown>;
  watch(holder, 'now', (trace) => (trace.clockRead = true));
  watch(holder, 'principal', (trace) => trace.widen('principal'));
  return context;
}

function watch(holder: Record<string, unknown>, property: string, noted: (trace: StateTrace) => void): void {
  if (!(property in holder)) return;
  let value = holder[property];
  Object.defineProperty(holder, property, {
    enumerable: true,
    configurable: true,
    get() {
      const trace = currentTrace();
      if (trace) noted(trace);
      return value;
    },
    set(next: unknown) {
      value = next;
    },
  });
}

/**
 * What a subgraph answer says of the state (`extensions.state`), read by the gateway's state cache: a read's
 * tags, grain and bound, or why it cannot be kept; a write's log position and the tags it changed.
 */
export interface StateExtension {
  tags?: string[];
  grain?: StateGrain;
  /** Epoch ms until which the answer holds (the clock was read); absent: until a write. */
  validUntil?: number;
  uncacheable?: string;
  /** The database the answer came from: a gateway keeps it only when it reads that database's event log. */
  lineage?: string;
  /** The newest log position of the request's writes, as decimal text. */
  position?: string;
  changed?: string[];
}

/** The extension a trace answers with; null when the request touched no state. */
export function stateExtension(trace: StateTrace): StateExtension | null {
  const verdict = trace.verdict();
  const out: StateExtension = {};
  if (trace.written) {
    out.position = trace.written.position.toString();
    out.changed = [...trace.written.tags];
  }
  if (verdict) out.uncacheable = verdict;
  else if (trace.tags.size > 0) {
    out.tags = [...trace.tags];
    out.grain = trace.grain;
    if (trace.validUntil !== null && Number.isFinite(trace.validUntil)) out.validUntil = trace.validUntil;
  }
  if (Object.keys(out).length === 0) return null;
  if (trace.lineage) out.lineage = trace.lineage;
  return out;
}

/** Tables a statement names, by what it does to them. */
interface StatementTables {
  read: readonly string[];
  written: readonly string[];
  /** A statement with a WITH clause: its row count is its last part's, not what its other parts changed. */
  compound: boolean;
}

const WRITTEN = /\b(?:insert\s+into|update|delete\s+from)\s+"?([a-z_][a-z0-9_]*)"?(?!\s*\()/gi;
const NAMED = /\b(?:from|join)\s+"?([a-z_][a-z0-9_]*)"?(?!\s*\()/gi;

/** Every table a statement names that `isTable` says is one, read or written. */
function tablesOf(sql: string, isTable: (name: string) => boolean): StatementTables {
  const written = new Set<string>();
  for (const m of sql.matchAll(WRITTEN)) {
    const name = m[1]!.toLowerCase();
    // `UPDATE SET` of `ON CONFLICT … DO UPDATE SET` names no table.
    if (name !== 'set' && isTable(name)) written.add(name);
  }
  const read = new Set<string>();
  for (const m of sql.matchAll(NAMED)) {
    const name = m[1]!.toLowerCase();
    if (isTable(name)) read.add(name);
  }
  return { read: [...read], written: [...written], compound: /^\s*with\b/i.test(sql) };
}

/** What a transaction appended: the tags of its events and the newest id. */
interface Appended {
  tags: Set<string>;
  position: bigint;
}

const appendedBy = new WeakMap<Queryable, Appended>();

/** Records events appended inside a transaction (platform/outbox.ts calls it). */
export function noteAppended(tx: Queryable, tags: Iterable<string>, ids: readonly string[]): void {
  const appended = appendedBy.get(tx);
  if (!appended) return;
  for (const tag of tags) appended.tags.add(tag);
  for (const id of ids) if (BigInt(id) > appended.position) appended.position = BigInt(id);
}

export class StateWriteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateWriteError';
  }
}

const MAX_KNOWN_STATEMENTS = 2000;

/**
 * `db` as a subgraph with state `tables` uses it: reads traced, writes to state tables refused unless their
 * transaction appends an event tagged with the table's collection. `ownPrefix` marks the subgraph's tables
 * (`rental_`): a read of one that is not declared leaves the answer uncacheable. `lineage` is the database's
 * identity, which every answer carries: a gateway reading another database's log keeps none of them.
 */
export function traceStateAccess(db: Database, tables: StateTables, ownPrefix: string, lineage: string): Database {
  const statement = statementReader(tables, ownPrefix);
  const traceRead = (found: StatementTables) => {
    const scope = scopes.getStore();
    if (!scope) return;
    scope.trace.lineage = lineage;
    noteRead(scope, found, tables);
  };
  const writtenTypes = (found: StatementTables) => found.written.filter((t) => t in tables).map((t) => tables[t]!.type);
  const inTransaction = (tx: Queryable, changed: Set<string>): Queryable => ({
    async query<R>(sql: string, params?: readonly unknown[]) {
      const found = statement(sql);
      traceRead(found);
      const result = await tx.query<R>(sql, params);
      // A plain statement that changed no row changed nothing a read returns: it needs no event. A compound
      // one's count is its last part's: it counts as written whatever the count.
      if (result.rowCount > 0 || found.compound) for (const type of writtenTypes(found)) changed.add(type);
      return result;
    },
  });
  return {
    get kind() {
      return db.kind;
    },
    get retries() {
      return db.retries;
    },
    query(sql, params) {
      const found = statement(sql);
      traceRead(found);
      if (writtenTypes(found).length > 0 && !scopes.getStore()?.unobserved) {
        return Promise.reject(
          new StateWriteError(`a write to ${found.written.join(', ')} outside a transaction cannot append its event: write state in a transaction`),
        );
      }
      return db.query(sql, params);
    },
    async transaction(fn) {
      const unobserved = scopes.getStore()?.unobserved ?? false;
      let appended: Appended | null = null;
      const result = await db.transaction(async (raw) => {
        const changed = new Set<string>();
        const tx = inTransaction(raw, changed);
        appended = { tags: new Set(), position: 0n };
        appendedBy.set(tx, appended);
        const value = await fn(tx);
        if (!unobserved) refuseSilentWrites(changed, appended);
        return value;
      });
      noteWritten(appended);
      return result;
    },
    exec: (sql) => db.exec(sql),
    readCacheStats: () => db.readCacheStats(),
    poolStats: () => db.poolStats(),
    listen: (channel, onPayload) => db.listen(channel, onPayload),
    close: () => db.close(),
  };
}

/** The tables of a statement, found once per text. */
function statementReader(tables: StateTables, ownPrefix: string): (sql: string) => StatementTables {
  const known = new Map<string, StatementTables>();
  const isTable = (name: string) => name in tables || name.startsWith(ownPrefix) || name === 'outbox';
  return (sql) => {
    let found = known.get(sql);
    if (!found) {
      found = tablesOf(sql, isTable);
      if (known.size >= MAX_KNOWN_STATEMENTS) known.clear();
      known.set(sql, found);
    }
    return found;
  };
}

/** A read in a request: its state tables' collections (unless narrowed) and grains, or why it cannot be kept. */
function noteRead(scope: Scope, found: StatementTables, tables: StateTables): void {
  for (const table of found.read) {
    const declared = tables[table];
    if (!declared) {
      scope.trace.refuse(`reads ${table}, which is not declared state`);
      continue;
    }
    scope.trace.widen(declared.grain);
    if (!scope.narrowed?.has(declared.type)) scope.trace.tags.add(stateTag.collection(declared.type));
  }
}

/** Refuses a transaction that wrote a state type without an event tagged with its collection. */
function refuseSilentWrites(changed: ReadonlySet<string>, appended: Appended): void {
  const silent = [...changed].filter((type) => !appended.tags.has(stateTag.collection(type)));
  if (silent.length > 0) {
    throw new StateWriteError(
      `a write to the ${silent.join(', ')} state appends no event tagged ${silent.join(', ')}: every gateway's cache would keep what it changed`,
    );
  }
}

/** After a commit that appended events: the request learns their newest position and the tags they carried. */
function noteWritten(appended: Appended | null): void {
  const trace = currentTrace();
  if (!trace || !appended || appended.position === 0n) return;
  trace.written ??= { position: 0n, tags: new Set() };
  if (appended.position > trace.written.position) trace.written.position = appended.position;
  for (const tag of appended.tags) trace.written.tags.add(tag);
}
