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
  db: Database;
  schema: GraphQLSchema;
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
    const key = `${operationName ?? ''}\u0000${text}`;
    let operation = this.known.get(key);
    if (!operation) {
      const definition = getOperationAST(document, operationName);
      operation = {
        id: createHash('sha256').update(text).digest('hex').slice(0, 16),
        name: definition?.name?.value ?? '',
        coordinates: coordinatesOf(this.options.schema, document, operationName),
      };
      if (this.known.size >= MAX_OPERATIONS_KNOWN) this.known.delete(this.known.keys().next().value!);
      this.known.set(key, operation);
    }
    const bucket = Math.floor(this.now / this.options.bucketMs) * this.options.bucketMs;
    const label = name ?? operation.name;
    const clientName = client.name ?? '';
    const version = client.version ?? '';
    let entryKey = `${bucket}\u0000${clientName}\u0000${version}\u0000${client.principal.tenant}\u0000${client.principal.id}\u0000${label}\u0000${operation.id}`;
    let entry = this.pending.get(entryKey);
    if (!entry) {
      const overflow = this.pending.size >= this.options.maxOperations;
      if (overflow) {
        entryKey = `${bucket}\u0000${clientName}\u0000${version}\u0000${client.principal.tenant}\u0000${client.principal.id}\u0000${OTHER}\u0000`;
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
    const columns: unknown[][] = [[], [], [], [], [], [], [], [], []];
    for (const e of entries) {
      for (const coordinate of e.coordinates) {
        const row = [coordinate, new Date(e.bucket).toISOString(), e.client, e.version, e.tenant, e.principal, e.operation, e.operationId, e.requests];
        row.forEach((value, i) => columns[i]!.push(value));
      }
    }
    if (columns[0]!.length > 0) {
      await this.options.db.query(
        `INSERT INTO gateway_schema_usage (coordinate, bucket, client_name, client_version, tenant, principal, operation_name, operation_id, requests)
         SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[])
         ON CONFLICT (coordinate, bucket, client_name, client_version, tenant, principal, operation_name, operation_id)
         DO UPDATE SET requests = gateway_schema_usage.requests + excluded.requests`,
        columns,
      );
    }
    await this.options.db.query('DELETE FROM gateway_schema_usage WHERE bucket < $1', [new Date(this.now - this.options.retentionMs).toISOString()]);
  }

  /** Who used `coordinate` since `since`: what is counted in memory is flushed first. */
  async usage(coordinate: string, since: Date): Promise<UsageRow[]> {
    await this.flush();
    const { rows } = await this.options.db.query<{
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
      [coordinate, new Date(Math.floor(since.getTime() / this.options.bucketMs) * this.options.bucketMs).toISOString()],
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
