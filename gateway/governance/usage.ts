import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { getOperationAST, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Database } from '../../platform/db.js';
import type { MigrationSet } from '../../platform/migrate.js';
import type { Principal } from '../../platform/principal.js';
import { coordinatesOf, variableCoordinates, type OperationCoordinates } from './coordinates.js';

/*
 * Field usage per client, kept here rather than sent to a hosted service: every operation the gateway runs
 * (GraphQL over HTTP, REST routes, subscriptions on every transport) is counted per client (its
 * `apollographql-client-name` and `-version`, and the principal), per operation and per time bucket, with
 * the schema coordinates it used. Counting is a map lookup and an increment per request: an operation's
 * coordinates are found once per distinct text and kept (bounded). Counts wait in memory and are added to
 * the database every flush; past `maxOperations` distinct client-operation pairs in one flush interval, the
 * rest count under the operation `(other)`, so memory stays bounded whatever clients send.
 */

export const USAGE_MIGRATIONS: MigrationSet = { owner: 'gateway', dir: fileURLToPath(new URL('./migrations', import.meta.url)) };

/** Who ran an operation. */
export interface UsageClient {
  name: string | null;
  version: string | null;
  principal: Principal;
}

export interface UsageOptions {
  store: UsageStore;
  /** The schema served now: an operation's coordinates are found against it. */
  schema: () => GraphQLSchema;
  bucketMs: number;
  retentionMs: number;
  maxOperations: number;
  now?: () => number;
  /** A flush that failed (its counts are kept for the next one). */
  onError?: (error: unknown) => void;
}

/** One client's use of one coordinate through one operation, since a time. */
export interface UsageRow {
  client: string | null;
  version: string | null;
  tenant: string;
  principal: string;
  operation: string;
  operationId: string;
  requests: number;
  lastSeen: string;
}

interface Operation {
  id: string;
  /** A short key of its own, for the pending counts' keys. */
  seq: number;
  /** The operation's name in its document ('' for an anonymous one). */
  name: string;
  coordinates: OperationCoordinates;
}

interface Entry {
  bucket: number;
  client: string;
  version: string;
  tenant: string;
  principal: string;
  operation: string;
  operationId: string;
  requests: number;
  coordinates: Set<string>;
}

const OTHER = '(other)';
/** Distinct operation texts whose coordinates are kept. */
const MAX_OPERATIONS_KNOWN = 2000;

export class UsageRecorder {
  private readonly known = new Map<string, Operation>();
  /** The same, by parsed document: Apollo Server hands over one DocumentNode per distinct text it keeps. */
  private readonly byDocument = new WeakMap<DocumentNode, Map<string, Operation>>();
  private sequence = 0;
  private pending = new Map<string, Entry>();
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly options: UsageOptions) {}

  private get now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /**
   * Counts one operation: `text` is its document as sent (the key of its coordinates), `name` how the
   * operation is reported (its operation name, a REST route, or null for an anonymous one).
   */
  record(
    client: UsageClient,
    text: string,
    document: DocumentNode,
    operationName: string | null | undefined,
    variables?: Record<string, unknown> | null,
    name?: string,
  ): void {
    const operation = this.operationOf(text, document, operationName ?? '');
    const bucket = Math.floor(this.now / this.options.bucketMs) * this.options.bucketMs;
    const label = name ?? operation.name;
    const clientName = client.name ?? '';
    const version = client.version ?? '';
    let entryKey = `${bucket}\u0000${operation.seq}\u0000${name ?? ''}\u0000${clientName}\u0000${version}\u0000${client.principal.tenant}\u0000${client.principal.id}`;
    let entry = this.pending.get(entryKey);
    if (!entry) {
      const overflow = this.pending.size >= this.options.maxOperations;
      if (overflow) {
        entryKey = `${bucket}\u0000${OTHER}\u0000\u0000${clientName}\u0000${version}\u0000${client.principal.tenant}\u0000${client.principal.id}`;
        entry = this.pending.get(entryKey);
      }
      if (!entry) {
        entry = {
          bucket,
          client: clientName,
          version,
          tenant: client.principal.tenant,
          principal: client.principal.id,
          operation: overflow ? OTHER : label,
          operationId: overflow ? '' : operation.id,
          requests: 0,
          coordinates: new Set(),
        };
        this.pending.set(entryKey, entry);
      }
    }
    entry.requests++;
    if (entry.coordinates.size === 0 || entry.operation === OTHER) for (const c of operation.coordinates.fixed) entry.coordinates.add(c);
    if (operation.coordinates.variables.length > 0) variableCoordinates(operation.coordinates.variables, variables, entry.coordinates);
  }

  /** An operation's id, name and coordinates: found once per document (or text), then kept (bounded). */
  private operationOf(text: string, document: DocumentNode, operationName: string): Operation {
    const byName = this.byDocument.get(document);
    const cached = byName?.get(operationName);
    if (cached) return cached;
    const key = `${operationName}\u0000${text}`;
    let operation = this.known.get(key);
    if (!operation) {
      const definition = getOperationAST(document, operationName || undefined);
      operation = {
        id: createHash('sha256').update(text).digest('hex').slice(0, 16),
        seq: ++this.sequence,
        name: definition?.name?.value ?? '',
        coordinates: coordinatesOf(this.options.schema(), document, operationName || undefined),
      };
      if (this.known.size >= MAX_OPERATIONS_KNOWN) this.known.delete(this.known.keys().next().value!);
      this.known.set(key, operation);
    }
    if (byName) byName.set(operationName, operation);
    else this.byDocument.set(document, new Map([[operationName, operation]]));
    return operation;
  }

  /** Client-operation pairs counted since the last flush (bounded by `maxOperations` + one per client). */
  get pendingEntries(): number {
    return this.pending.size;
  }

  /** Adds what is counted to the database (one statement), and drops buckets past the retention. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write());
    return this.flushing;
  }

  private async write(): Promise<void> {
    const taken = this.pending;
    this.pending = new Map();
    try {
      await this.insert([...taken.values()]);
    } catch (error) {
      // Kept for the next flush: counts taken back, added to whatever came in meanwhile.
      for (const [key, entry] of taken) {
        const now = this.pending.get(key);
        if (!now) this.pending.set(key, entry);
        else {
          now.requests += entry.requests;
          for (const c of entry.coordinates) now.coordinates.add(c);
        }
      }
      this.options.onError?.(error);
    }
  }

  private async insert(entries: readonly Entry[]): Promise<void> {
    const rows: StoredUsage[] = [];
    for (const e of entries) {
      for (const coordinate of e.coordinates) {
        rows.push({
          coordinate,
          bucket: e.bucket,
          client: e.client,
          version: e.version,
          tenant: e.tenant,
          principal: e.principal,
          operation: e.operation,
          operationId: e.operationId,
          requests: e.requests,
        });
      }
    }
    if (rows.length > 0) await this.options.store.add(rows);
    await this.options.store.prune(this.now - this.options.retentionMs);
  }

  /** Who used `coordinate` since `since`: what is counted in memory is flushed first. */
  async usage(coordinate: string, since: Date): Promise<UsageRow[]> {
    await this.flush();
    return this.options.store.query(coordinate, Math.floor(since.getTime() / this.options.bucketMs) * this.options.bucketMs);
  }
}

/** One coordinate's count for one client, operation and bucket, as stored. */
type StoredUsage = Omit<Entry, 'coordinates'> & { coordinate: string };

/** Where flushed counts are added up: the database, or (a gateway without one) this process's memory. */
export interface UsageStore {
  add(rows: readonly StoredUsage[]): Promise<void>;
  /** Drops the buckets before `before` (ms since the epoch). */
  prune(before: number): Promise<void>;
  /** Counts of `coordinate` from the bucket starting at `since`, per client and operation, most requests first. */
  query(coordinate: string, since: number): Promise<UsageRow[]>;
}

/** `gateway_schema_usage`: counts add up across flushes and across the gateway processes of one database. */
export class SqlUsageStore implements UsageStore {
  constructor(private readonly db: Database) {}

  async add(rows: readonly StoredUsage[]): Promise<void> {
    const columns: unknown[][] = [[], [], [], [], [], [], [], [], []];
    for (const r of rows) {
      [r.coordinate, new Date(r.bucket).toISOString(), r.client, r.version, r.tenant, r.principal, r.operation, r.operationId, r.requests].forEach((value, i) =>
        columns[i]!.push(value),
      );
    }
    await this.db.query(
      `INSERT INTO gateway_schema_usage (coordinate, bucket, client_name, client_version, tenant, principal, operation_name, operation_id, requests)
       SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[])
       ON CONFLICT (coordinate, bucket, client_name, client_version, tenant, principal, operation_name, operation_id)
       DO UPDATE SET requests = gateway_schema_usage.requests + excluded.requests`,
      columns,
    );
  }

  async prune(before: number): Promise<void> {
    await this.db.query('DELETE FROM gateway_schema_usage WHERE bucket < $1', [new Date(before).toISOString()]);
  }

  async query(coordinate: string, since: number): Promise<UsageRow[]> {
    const { rows } = await this.db.query<{
      client_name: string;
      client_version: string;
      tenant: string;
      principal: string;
      operation_name: string;
      operation_id: string;
      requests: string | number;
      last_seen: Date | string;
    }>(
      `SELECT client_name, client_version, tenant, principal, operation_name, operation_id, sum(requests) AS requests, max(bucket) AS last_seen
       FROM gateway_schema_usage WHERE coordinate = $1 AND bucket >= $2
       GROUP BY client_name, client_version, tenant, principal, operation_name, operation_id
       ORDER BY sum(requests) DESC, client_name, operation_name`,
      [coordinate, new Date(since).toISOString()],
    );
    return rows.map((r) => ({
      client: r.client_name || null,
      version: r.client_version || null,
      tenant: r.tenant,
      principal: r.principal,
      operation: r.operation_name,
      operationId: r.operation_id,
      requests: Number(r.requests),
      lastSeen: new Date(r.last_seen).toISOString(),
    }));
  }
}

/**
 * Counts kept in this process (a distributed gateway without DATABASE_URL): the same answers as the table,
 * for as long as the process lives, at most `maxRows` rows (the oldest buckets go first).
 */
export class MemoryUsageStore implements UsageStore {
  private readonly rows = new Map<string, StoredUsage>();

  constructor(private readonly maxRows = 200_000) {}

  async add(rows: readonly StoredUsage[]): Promise<void> {
    for (const r of rows) {
      const key = [r.coordinate, r.bucket, r.client, r.version, r.tenant, r.principal, r.operation, r.operationId].join('\u0000');
      const kept = this.rows.get(key);
      if (kept) kept.requests += r.requests;
      else this.rows.set(key, { ...r });
    }
    while (this.rows.size > this.maxRows) {
      const oldest = Math.min(...[...this.rows.values()].map((r) => r.bucket));
      await this.prune(oldest + 1);
    }
  }

  async prune(before: number): Promise<void> {
    for (const [key, r] of this.rows) if (r.bucket < before) this.rows.delete(key);
  }

  async query(coordinate: string, since: number): Promise<UsageRow[]> {
    const groups = new Map<string, UsageRow>();
    for (const r of this.rows.values()) {
      if (r.coordinate !== coordinate || r.bucket < since) continue;
      const key = [r.client, r.version, r.tenant, r.principal, r.operation, r.operationId].join('\u0000');
      const group = groups.get(key);
      const seen = new Date(r.bucket).toISOString();
      if (group) {
        group.requests += r.requests;
        if (seen > group.lastSeen) group.lastSeen = seen;
      } else {
        groups.set(key, {
          client: r.client || null,
          version: r.version || null,
          tenant: r.tenant,
          principal: r.principal,
          operation: r.operation,
          operationId: r.operationId,
          requests: r.requests,
          lastSeen: seen,
        });
      }
    }
    return [...groups.values()].sort(
      (a, b) => b.requests - a.requests || (a.client ?? '').localeCompare(b.client ?? '') || a.operation.localeCompare(b.operation),
    );
  }
}
