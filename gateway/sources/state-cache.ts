import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import type { StoredEvent } from '../../platform/event-hub.js';
import type { Principal } from '../../platform/principal.js';
import type { StateExtension, StateGrain } from '../../platform/state-trace.js';
import type { GatewayContext } from '../pipeline/context.js';
import { jsonKey } from '../pipeline/json-key.js';
import { isRead } from './collapse.js';

/*
 * Answers of subgraph state reads, kept per gateway process and dropped exactly when a write touches what
 * they read (docs/scaling.md, "The state cache").
 *
 * A subgraph answer says what it read (`extensions.state`, platform/state-trace.ts): the tags it depends on
 * (a collection, a row, an owner's rows), who else may be served it (its grain) and, when it read the clock,
 * until when it holds. Every write appends an event carrying the tags it changed, in its transaction, so
 * this process hears of every write from the event log, whoever made it. An event evicts the entries whose
 * tags it names; a mutation answered through this process evicts before its answer leaves.
 *
 * The fence: every eviction (an event, a write's answer, an operator's request) is numbered. A fill records
 * the number and the log position at which its fetch started, and is stored only if no eviction since then
 * named one of its tags: an answer read before a write can never be stored after the write's eviction.
 * Evictions are remembered in a bounded ring; a fill older than the ring is discarded.
 *
 * The consumer's health: a probe reads the newest outbox id every quarter of the lag bound; the log is
 * caught up as of the probe's start once this process has read that far. While the last catch-up is older
 * than the bound (the log unreachable, a consumer behind), or the log went back (another database), nothing
 * is served from here: reads go to the subgraphs until it has caught up again.
 */

export interface StateCacheOptions {
  /** Bytes of answers (JSON text) and keys kept. */
  maxBytes: number;
  /** Most bytes one tenant's entries may hold, as a share of `maxBytes` (0..1]. */
  tenantShare: number;
  /** Nothing is served while the last catch-up with the log is older than this. */
  maxLagMs: number;
  /** How long a request that names a log position waits for this process to read that far before reading through. */
  waitMs: number;
  /** No entry is served after this long, whatever the log says. */
  maxAgeMs: number;
  /** The newest id in the log's source (the outbox); rejects when it cannot be read. */
  newest: () => Promise<bigint>;
  /** The position this process has read the log to. */
  delivered: () => bigint;
  /** Asks the consumer to read what is new; resolves when that read is done. */
  wake: () => Promise<void>;
  /** Seconds an entry of this fetch document may live by its `@cacheControl` hints; null: no hint caps it. */
  capOf?: (query: string) => number | null;
  /** Monotonic time (ms) for ages and the lag bound. @default performance.now */
  now?: () => number;
  /** The subgraphs' clock (epoch ms), which their `validUntil` is given in. @default Date.now */
  wallClock?: () => number;
  onLineageLost?: (message: string) => void;
  /**
   * The identity of the database whose log this process reads: answers from another database (a subgraph
   * server on a database of its own) are never kept, since none of its writes would evict them.
   */
  lineage: string;
}

export interface StateCacheStats {
  hits: Map<string, number>;
  misses: Map<string, number>;
  /** Reads that could not be served from here (the consumer behind, a position not reached). */
  bypassed: Map<string, number>;
  evictions: Map<EvictionCause, number>;
  /** Fills dropped because an eviction named one of their tags while they were fetched. */
  fenced: number;
}

type EvictionCause = 'event' | 'write' | 'admin' | 'memory' | 'tenant' | 'expired';

interface Entry {
  key: string;
  /** Whose share it counts against: the tenant, or `*` for an answer every caller may see. */
  slot: string;
  text: string;
  bytes: number;
  tags: readonly string[];
  expiresAt: number;
  /** Epoch ms (the subgraphs' clock) from which its answer no longer holds; infinite when it read no clock. */
  validUntil: number;
  /** The log position its fetch started at. */
  position: bigint;
}

interface Eviction {
  seq: number;
  /** The tags it named; null: everything. */
  tags: ReadonlySet<string> | null;
}

/** Evictions remembered for the fence; a fill that started before the oldest of them is discarded. */
const RING = 8192;
const MAX_GRAINS = 20_000;
const ENTRY_OVERHEAD = 256;

export class StateCache {
  private readonly entries = new Map<string, Entry>();
  private readonly slots = new Map<string, { bytes: number; entries: Map<string, Entry> }>();
  private readonly byTag = new Map<string, Set<string>>();
  /** The grain a fetch's answers were last stored at (by the key without the caller). */
  private readonly grains = new Map<string, StateGrain>();
  private readonly ring: Eviction[] = [];
  private seq = 0;
  /** Fills that started before this eviction number are discarded. */
  private ringFloor = 0;
  private bytes = 0;
  private caughtUpAt = Number.NEGATIVE_INFINITY;
  private lineageLost = false;
  private lastLag: { events: bigint; probedAt: number } | null = null;
  private readonly now: () => number;
  private readonly wallClock: () => number;
  readonly stats: StateCacheStats = { hits: new Map(), misses: new Map(), bypassed: new Map(), evictions: new Map(), fenced: 0 };
  private readonly caps = new Map<string, number | null>();

  constructor(readonly options: StateCacheOptions) {
    this.now = options.now ?? (() => performance.now());
    this.wallClock = options.wallClock ?? Date.now;
  }

  /** Evictions so far: fetches collapse only within one epoch (gateway/sources/collapse.ts). */
  get epoch(): number {
    return this.seq;
  }

  /** Whether entries may be served now: the log caught up within the bound, its lineage intact. */
  serving(): boolean {
    return !this.lineageLost && this.now() - this.caughtUpAt <= this.options.maxLagMs;
  }

  snapshot() {
    return {
      entries: this.entries.size,
      bytes: this.bytes,
      serving: this.serving(),
      lagMs: Number.isFinite(this.caughtUpAt) ? Math.max(0, this.now() - this.caughtUpAt) : null,
      lagEvents: this.lastLag ? Number(this.lastLag.events) : null,
    };
  }

  /**
   * One probe of the log: reads its newest id, has the consumer read that far, and records the catch-up as
   * of the probe's start. A log that went back (another database) stops every serve for good.
   */
  async probe(): Promise<void> {
    const startedAt = this.now();
    let newest: bigint;
    try {
      newest = await this.options.newest();
    } catch (error) {
      // The log cannot be read: nothing is served until a probe succeeds again (not only once the bound passed).
      this.caughtUpAt = Number.NEGATIVE_INFINITY;
      throw error;
    }
    let delivered = this.options.delivered();
    if (newest < delivered) {
      if (!this.lineageLost) {
        this.lineageLost = true;
        this.evictAll('event');
        this.options.onLineageLost?.(
          `the event log's newest id (${newest}) is behind what this gateway read (${delivered}): another database? the state cache serves nothing until the gateway restarts`,
        );
      }
      return;
    }
    // A read of the log already under way may have started before `newest` was written: read again, a few times.
    for (let attempt = 0; delivered < newest && attempt < 4; attempt += 1) {
      await this.options.wake();
      delivered = this.options.delivered();
    }
    this.lastLag = { events: newest > delivered ? newest - delivered : 0n, probedAt: startedAt };
    if (delivered >= newest && startedAt > this.caughtUpAt) this.caughtUpAt = startedAt;
  }

  /** An event read from the log: evicts what it changed. */
  onEvent(event: StoredEvent): void {
    if (event.tags.includes('*')) this.evictAll('event');
    else if (event.tags.length > 0) this.evictTags(event.tags, 'event');
  }

  /**
   * Evicts by tags (an event, an operator's request, a write answered here); `Type:*` names every tag of the
   * type. How many entries went.
   */
  evictTags(tags: Iterable<string>, cause: EvictionCause): number {
    const named = new Set<string>();
    for (const tag of tags) {
      if (!tag.endsWith(':*')) {
        named.add(tag);
        continue;
      }
      const type = tag.slice(0, -2);
      named.add(type);
      for (const kept of this.byTag.keys()) if (kept.startsWith(`${type}:`) || kept.startsWith(`${type}@`)) named.add(kept);
    }
    this.remember(named);
    let dropped = 0;
    for (const tag of named) {
      const keys = this.byTag.get(tag);
      if (!keys) continue;
      for (const key of [...keys]) {
        const entry = this.entries.get(key);
        if (entry) {
          this.drop(entry, cause);
          dropped += 1;
        }
      }
    }
    return dropped;
  }

  evictAll(cause: EvictionCause): number {
    this.remember(null);
    const n = this.entries.size;
    for (const entry of [...this.entries.values()]) this.drop(entry, cause);
    return n;
  }

  /**
   * Waits (at most `waitMs`) until this process has read the log to `position`; false when it has not by
   * then (the request then reads through).
   */
  async reach(position: bigint): Promise<boolean> {
    if (this.options.delivered() >= position) return true;
    const deadline = this.now() + this.options.waitMs;
    while (this.now() < deadline) {
      await Promise.race([this.options.wake(), new Promise((resolve) => setTimeout(resolve, Math.max(1, deadline - this.now())).unref())]);
      if (this.options.delivered() >= position) return true;
      // Nothing new yet: the write's notification has not reached the log reader; look again shortly.
      await new Promise((resolve) => setTimeout(resolve, 5).unref());
    }
    return this.options.delivered() >= position;
  }

  /** `source` with its state reads kept and its writes' evictions applied; `subgraph` names it in metrics. */
  wrap(subgraph: string, source: GraphQLDataSource<GatewayContext>): GraphQLDataSource<GatewayContext> {
    if (this.options.maxBytes <= 0) return source;
    const count = (m: Map<string, number>) => m.set(subgraph, (m.get(subgraph) ?? 0) + 1);
    return {
      process: async (options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> => {
        // Health checks carry no incoming request; they must reach the subgraph.
        if (!('incomingRequestContext' in options)) return source.process(options);
        const context = options.context;
        const query = options.request.query ?? '';
        const given = isRead(query) ? jsonKey(options.request.variables) : null;
        if (given === null) return this.written(await source.process(options), context);
        const base = `${subgraph}\u0000${options.request.operationName ?? ''}\u0000${query}\u0000${given}\u0000${scopesKey(context.principal)}`;
        const servable = await this.servable(context);
        if (servable) {
          const grain = this.grains.get(base);
          const kept = grain === undefined ? undefined : this.read(base + callerPart(grain, context.principal));
          if (kept !== undefined) {
            count(this.stats.hits);
            return JSON.parse(kept) as GatewayGraphQLResponse;
          }
          count(this.stats.misses);
        } else count(this.stats.bypassed);
        const startedSeq = this.seq;
        const startedAt = this.options.delivered();
        const response = this.written(await source.process(options), context);
        const state = stateOf(response);
        if (state && !(response.errors && response.errors.length > 0) && response.data)
          this.fill(base, query, context.principal, state, response, startedSeq, startedAt);
        return response;
      },
    };
  }

  /** Whether this request may be answered from here: the log caught up, and as far as the position it names. */
  private async servable(context: GatewayContext): Promise<boolean> {
    if (!this.serving()) return false;
    const asked = context.statePositions?.asked ?? null;
    if (asked === null || this.options.delivered() >= asked) return true;
    return this.reach(asked);
  }

  /** A subgraph answer that wrote: its tags evicted here before the answer leaves, its position noted for the caller. */
  private written(response: GatewayGraphQLResponse, context: GatewayContext): GatewayGraphQLResponse {
    const state = stateOf(response);
    if (!state?.position) return response;
    if (state.changed && state.changed.length > 0) this.evictTags(state.changed, 'write');
    const positions = context.statePositions;
    if (positions) {
      const position = BigInt(state.position);
      if (positions.written === null || position > positions.written) positions.written = position;
    }
    return response;
  }

  private fill(
    base: string,
    query: string,
    principal: Principal,
    state: StateExtension,
    response: GatewayGraphQLResponse,
    startedSeq: number,
    position: bigint,
  ): void {
    const tags = state.tags;
    if (!tags || tags.length === 0 || state.uncacheable || !state.grain || state.lineage !== this.options.lineage) return;
    if (!this.serving()) return;
    if (this.fenced(tags, startedSeq)) {
      this.stats.fenced += 1;
      return;
    }
    const now = this.now();
    let life = this.options.maxAgeMs;
    const cap = this.capOf(query);
    if (cap !== null) life = Math.min(life, cap * 1000);
    // `validUntil` is the subgraphs' clock, read again at every serve (a clock may jump).
    const validUntil = state.validUntil ?? Number.POSITIVE_INFINITY;
    if (life <= 0 || validUntil <= this.wallClock()) return;
    const grain = state.grain;
    if (this.grains.size >= MAX_GRAINS && !this.grains.has(base)) this.grains.delete(this.grains.keys().next().value!);
    // The finest grain any answer of this fetch was read at: a coarser one later never widens who is served.
    const known = this.grains.get(base);
    if (known !== undefined && GRAIN_ORDER[known] > GRAIN_ORDER[grain]) return;
    this.grains.set(base, grain);
    const key = base + callerPart(grain, principal);
    // Identical reads collapsed into one fetch each fill the same key: the first one kept stands.
    if (this.entries.has(key)) return;
    const text = JSON.stringify({ data: response.data });
    const slot = grain === 'everyone' ? '*' : principal.tenant;
    this.store({ key, slot, text, bytes: 2 * (key.length + text.length) + ENTRY_OVERHEAD, tags, expiresAt: now + life, validUntil, position });
  }

  /** Whether an eviction since `startedSeq` named one of `tags` (or everything), or the ring no longer reaches back that far. */
  private fenced(tags: readonly string[], startedSeq: number): boolean {
    if (startedSeq < this.ringFloor) return true;
    for (let i = this.ring.length - 1; i >= 0; i -= 1) {
      const eviction = this.ring[i]!;
      if (eviction.seq <= startedSeq) break;
      if (eviction.tags === null) return true;
      for (const tag of tags) if (eviction.tags.has(tag)) return true;
    }
    return false;
  }

  private remember(tags: ReadonlySet<string> | null): void {
    this.seq += 1;
    this.ring.push({ seq: this.seq, tags });
    if (this.ring.length > RING) {
      const dropped = this.ring.splice(0, this.ring.length - RING / 2);
      this.ringFloor = dropped[dropped.length - 1]!.seq;
    }
  }

  private capOf(query: string): number | null {
    if (!this.options.capOf) return null;
    if (this.caps.has(query)) return this.caps.get(query)!;
    const cap = this.options.capOf(query);
    if (this.caps.size >= 1000) this.caps.delete(this.caps.keys().next().value!);
    this.caps.set(query, cap);
    return cap;
  }

  private read(key: string): string | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now() || entry.validUntil <= this.wallClock()) {
      this.drop(entry, 'expired');
      return undefined;
    }
    // Most recently used last, overall and in its slot: the bounds take from the front.
    this.entries.delete(key);
    this.entries.set(key, entry);
    const slot = this.slots.get(entry.slot)!;
    slot.entries.delete(key);
    slot.entries.set(key, entry);
    return entry.text;
  }

  private store(entry: Entry): void {
    const { maxBytes, tenantShare } = this.options;
    if (entry.bytes > maxBytes / 16) return;
    const old = this.entries.get(entry.key);
    if (old) this.drop(old, 'expired');
    let slot = this.slots.get(entry.slot);
    if (!slot) this.slots.set(entry.slot, (slot = { bytes: 0, entries: new Map() }));
    this.entries.set(entry.key, entry);
    slot.entries.set(entry.key, entry);
    slot.bytes += entry.bytes;
    this.bytes += entry.bytes;
    for (const tag of entry.tags) {
      let keys = this.byTag.get(tag);
      if (!keys) this.byTag.set(tag, (keys = new Set()));
      keys.add(entry.key);
    }
    // A tenant over its share gives up its own least recently used entries; the answers every caller may see share the whole.
    if (entry.slot !== '*') {
      for (const oldest of slot.entries.values()) {
        if (slot.bytes <= maxBytes * tenantShare) break;
        this.drop(oldest, 'tenant');
      }
    }
    for (const oldest of this.entries.values()) {
      if (this.bytes <= maxBytes) break;
      this.drop(oldest, 'memory');
    }
  }

  private drop(entry: Entry, cause: EvictionCause): void {
    if (this.entries.get(entry.key) !== entry) return;
    this.entries.delete(entry.key);
    this.bytes -= entry.bytes;
    const slot = this.slots.get(entry.slot);
    if (slot) {
      slot.entries.delete(entry.key);
      slot.bytes -= entry.bytes;
      if (slot.entries.size === 0) this.slots.delete(entry.slot);
    }
    for (const tag of entry.tags) {
      const keys = this.byTag.get(tag);
      keys?.delete(entry.key);
      if (keys?.size === 0) this.byTag.delete(tag);
    }
    this.stats.evictions.set(cause, (this.stats.evictions.get(cause) ?? 0) + 1);
  }
}

/** The state a subgraph answer reports (platform/state-trace.ts), if any. */
function stateOf(response: GatewayGraphQLResponse): StateExtension | undefined {
  return (response.extensions as { state?: StateExtension } | undefined)?.state;
}

/** The caller's part of a key: nothing (every caller may see the answer), the tenant, or the principal. */
function callerPart(grain: StateGrain, principal: Principal): string {
  if (grain === 'everyone') return '';
  // As JSON: a tenant or principal id (a JWT's claims are any text) cannot run into the other.
  if (grain === 'tenant') return `\u0000t:${JSON.stringify(principal.tenant)}`;
  return `\u0000p:${JSON.stringify([principal.tenant, principal.id])}`;
}

const GRAIN_ORDER: Record<StateGrain, number> = { everyone: 0, tenant: 1, principal: 2 };

const scopeKeys = new WeakMap<Principal, string>();

/** The principal's scopes, sorted: what the subgraph's and the gateway's field rules judge by. */
function scopesKey(principal: Principal): string {
  let key = scopeKeys.get(principal);
  if (key === undefined) scopeKeys.set(principal, (key = [...principal.scopes].sort().join(' ')));
  return key;
}
