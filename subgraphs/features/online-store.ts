import { SYSTEM_VIEWER } from '../../platform/ownership.js';
import { createHash, randomUUID } from 'node:crypto';
import { domainError } from '../../platform/errors.js';
import { withDeadline } from '../../platform/deadline.js';
import { periodic } from '../../platform/periodic.js';
import type { EntityType } from './frame.js';
import { VIEW_DEFINITIONS } from './registry.js';
import type { EventHub } from '../../platform/event-hub.js';
import type { MaterializationRecord, OnlineRow, StoredOnlineRow } from './records.js';
import { MATERIALIZED_TOPIC, onlineKey, type FeaturesStore } from './store.js';

/**
 * The online store: what GET /features/online/... serves. The database by default (shared by every
 * instance on the same PostgreSQL, served from memory); Redis when REDIS_URL is set. Either way a materialization becomes
 * visible whole, in one step, or not at all, and the database records every materialization.
 */
export interface OnlineStore {
  readonly kind: 'database' | 'redis';
  publish(m: Omit<MaterializationRecord, 'id' | 'materializedAt' | 'onlineStore'>, rows: readonly OnlineRow[], at: Date): Promise<MaterializationRecord>;
  read(entityType: EntityType, id: string): Promise<StoredOnlineRow[]>;
  /** A round trip to the store; throws when it does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The database store: the rows live in `features_online` (replaced whole per view in the transaction that
 * records the materialization) and are served from an in-memory copy of the whole table, swapped in one
 * step. The copy is loaded on first read and reloaded after every materialization: at once by the
 * instance that made it (before it answers), and by every other instance on the same database when the
 * `features.materialized` outbox event reaches it (NOTIFY, or the hub's poll). A reload that fails marks
 * the copy stale: the next read reloads it or fails (503), never answering from a copy known to be old.
 */
export function databaseOnlineStore(store: FeaturesStore, events: EventHub): OnlineStore {
  let copy: Map<string, StoredOnlineRow[]> | null = null;
  let stale = true;
  let loading: Promise<void> | null = null;
  let again = false;

  /** Loads the table; a call during a load makes that load run once more, so it sees every commit before the call. */
  const reload = (): Promise<void> => {
    if (loading) {
      again = true;
      return loading;
    }
    loading = (async () => {
      do {
        again = false;
        try {
          copy = await store.allOnlineRows();
          stale = false;
        } catch (error) {
          stale = true;
          throw error;
        }
      } while (again);
    })().finally(() => {
      loading = null;
    });
    return loading;
  };

  const stopWatching = onMaterialized(events, async () => {
    stale = true;
    await reload().catch(() => undefined);
  });

  return {
    kind: 'database',
    async publish(m, rows, at) {
      const record = await store.recordMaterialization({ ...m, onlineStore: 'database' }, rows, at);
      stale = true;
      await reload();
      return record;
    },
    async read(entityType, id) {
      if (stale || !copy) await reload();
      return copy!.get(onlineKey(entityType, id)) ?? [];
    },
    ping: async () => {
      await store.ping();
    },
    close: async () => {
      await stopWatching();
      await loading?.catch(() => undefined);
    },
  };
}

/**
 * Calls `changed` for every `features.materialized` event this instance's outbox reader delivers (from any
 * instance on the database), one at a time; a stream that fails (an overflow) is opened again and `changed`
 * called, so nothing missed stays unseen. Returns the function that stops watching.
 */
function onMaterialized(events: EventHub, changed: () => Promise<void>): () => Promise<void> {
  let closed = false;
  let stream: AsyncIterableIterator<unknown> | null = null;
  void (async () => {
    while (!closed) {
      stream = events.stream(MATERIALIZED_TOPIC, { viewer: SYSTEM_VIEWER });
      try {
        for await (const event of stream) {
          void event;
          await changed();
        }
      } catch {
        await changed();
      }
    }
  })();
  return async () => {
    closed = true;
    await stream?.return?.();
  };
}

interface Pointer {
  key: string;
  materializationId: string;
  version: string;
  asOf: string;
  materializedAt: string;
}

const HSET_BATCH = 2000;
/**
 * A materialization's fresh hashes live on a lease until its swap makes them current (PERSIST in the swap's
 * MULTI): if the process dies between filling them and the swap, nothing would ever unlink them, and they
 * expire instead. Renewed with every batch and once more just before the swap.
 */
const FRESH_HASH_LEASE_MS = 5 * 60_000;

/** Milliseconds between two checks that Redis still holds the materialization the database records. */
const ONLINE_STORE_CHECK_MS = 1000;

/** Commands node-redis keeps waiting for answers before it refuses more ("The queue is full"). */
const MAX_QUEUED_COMMANDS = 10_000;
const QUEUE_FULL = 'The queue is full';

/** The lookup of one entity in several views' hashes (KEYS), as pairs: EXISTS, then HGET of ARGV[1] (nil when absent). */
const LOOKUP_SCRIPT = `local out = {}
for i, key in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('EXISTS', key)
  out[2 * i] = redis.call('HGET', key, ARGV[1])
end
return out`;
const LOOKUP_SHA = createHash('sha1').update(LOOKUP_SCRIPT).digest('hex');

/**
 * Redis layout (under a prefix): one hash per materialized view version, `<prefix>:v:<view>:<uuid>`,
 * entity id -> JSON [feature_ts, ...values]; and `<prefix>:current`, view -> pointer to the live hash.
 * A materialization fills fresh hashes first, then swaps every pointer in one MULTI/EXEC (inside the
 * database transaction that records it), then unlinks the hashes it replaced.
 *
 * Three guards around what Redis itself does not promise:
 * - fail fast: commands are not queued while the client is disconnected (`disableOfflineQueue`): a lookup or
 *   a materialization is answered 503 SERVICE_UNAVAILABLE at once, not after the reconnect gives up;
 * - a marker (`<prefix>:materialization`, set in the swap's MULTI) names the materialization Redis holds.
 *   Every ONLINE_STORE_CHECK_MS the store compares it with the newest materialization the database records
 *   for Redis; when Redis has lost it (restarted empty, flushed, evicted) the store is degraded (health and
 *   lookups answer 503, never 404 "not materialized") and rebuilt by re-running that materialization, by one
 *   instance at a time (a lock key in Redis), without a restart;
 * - `setRebuild` gives it the materialization to re-run (the service, once built).
 */
export async function redisOnlineStore(
  url: string,
  prefix: string,
  store: FeaturesStore,
  events: EventHub,
  /** How long a lookup or a ping waits for an answer (FEATURES_REDIS_TIMEOUT_MS). */
  timeoutMs: number,
): Promise<OnlineStore & { setRebuild(rebuild: (last: MaterializationRecord) => Promise<unknown>): void }> {
  return new RedisOnlineStore(await connectRedis(url), prefix, store, events, timeoutMs);
}

/** A connected client that fails fast (no offline queue, a bounded queue) and reconnects by itself. */
async function connectRedis(url: string) {
  // Loaded only when configured: a gateway without REDIS_URL never pays for the client's import.
  const { createClient } = await import('redis');
  const client = createClient({
    url,
    disableOfflineQueue: true,
    // node-redis's command timeout (5 s by default) ends once a command is written, so it never ends the wait
    // for a Redis that keeps its connection but does not answer; and it costs an AbortSignal and its timer per
    // command. Lookups and pings have a deadline of their own (`withDeadline`), and the queue a bound.
    commandOptions: { timeout: 0 },
    commandsQueueMaxLength: MAX_QUEUED_COMMANDS,
    socket: { connectTimeout: 2000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 2000) },
  });
  client.on('error', () => {
    // Reconnects by itself; commands fail meanwhile and are answered as errors.
  });
  await client.connect();
  return client;
}

type RedisClient = Awaited<ReturnType<typeof connectRedis>>;

const UNREACHABLE = 'Redis cannot be reached';
const unavailable = (why: string) => domainError('SERVICE_UNAVAILABLE', `The online store is unavailable: ${why}; retry later`);

/** The Redis online store over a connected client (see `redisOnlineStore` for its layout and guards). */
class RedisOnlineStore implements OnlineStore {
  readonly kind = 'redis';
  private readonly current: string;
  private readonly marker: string;
  private readonly rebuildLock: string;
  private readonly instance = randomUUID();
  private readonly silent: string;
  /** Why lookups answer 503 while Redis has lost the materialized values (null while it holds them). */
  private lost: string | null = null;
  /** The newest materialization id the database recorded for Redis, as last read (null: none yet, or unknown). */
  private expected: bigint | null = null;
  private rebuild: ((last: MaterializationRecord) => Promise<unknown>) | null = null;
  /**
   * The pointers, kept in memory: a lookup is then one round trip (the value, and whether its hash still
   * exists). Dropped after every materialization (here, or on another instance: the outbox event); a pointer
   * to a hash that is gone, or no pointer for any view asked, makes the lookup read them again from Redis.
   */
  private pointers: Map<string, Pointer> | null = null;
  private readonly watchdog: { stop(): Promise<void> };
  private readonly stopWatching: () => Promise<void>;

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly store: FeaturesStore,
    events: EventHub,
    private readonly timeoutMs: number,
  ) {
    this.current = `${prefix}:current`;
    this.marker = `${prefix}:materialization`;
    this.rebuildLock = `${prefix}:rebuilding`;
    this.silent = `Redis did not answer within ${timeoutMs} ms`;
    this.watchdog = periodic(() => this.check(), ONLINE_STORE_CHECK_MS);
    this.stopWatching = onMaterialized(events, async () => {
      this.pointers = null;
    });
  }

  publish(m: Parameters<OnlineStore['publish']>[0], rows: readonly OnlineRow[], at: Date): Promise<MaterializationRecord> {
    return this.guard(() => this.publishNow(m, rows, at));
  }

  read(entityType: EntityType, id: string): Promise<StoredOnlineRow[]> {
    return this.guard(() => withDeadline(this.readRows(entityType, id), this.timeoutMs, () => unavailable(this.silent)));
  }

  async ping(): Promise<void> {
    if (!this.client.isReady) throw new Error(UNREACHABLE);
    await withDeadline(this.client.ping(), this.timeoutMs, () => new Error(this.silent));
    if (this.lost) throw new Error(this.lost);
  }

  /** The materialization to re-run when Redis has lost its values (the service, once built). */
  setRebuild(fn: (last: MaterializationRecord) => Promise<unknown>): void {
    this.rebuild = fn;
  }

  async close(): Promise<void> {
    await this.watchdog.stop();
    await this.stopWatching();
    await this.client.close().catch(() => this.client.destroy());
  }

  /**
   * Runs Redis commands; while the client is disconnected, when it drops meanwhile, or when too many commands
   * already wait for answers, a 503.
   */
  private async guard<T>(call: () => Promise<T>): Promise<T> {
    if (!this.client.isReady) throw unavailable(UNREACHABLE);
    try {
      return await call();
    } catch (error) {
      if (!this.client.isReady) throw unavailable(UNREACHABLE);
      if (error instanceof Error && error.message === QUEUE_FULL) throw unavailable(`${MAX_QUEUED_COMMANDS} commands already wait for Redis`);
      throw error;
    }
  }

  /**
   * Is the materialization the database records for Redis still there? Returns it when it is lost. A marker
   * at or past the id last read answers without the database (newer materializations only move the marker
   * forward); the database is read only when the marker is missing or behind.
   */
  private async detect(): Promise<MaterializationRecord | null> {
    if (!this.client.isReady) return null;
    const raw = await this.client.get(this.marker);
    const held = raw === null ? null : BigInt(raw);
    if (held !== null && this.expected !== null && held >= this.expected) {
      this.lost = null;
      return null;
    }
    const last = await this.store.lastMaterialization('redis');
    this.expected = last ? BigInt(last.id) : null;
    if (!last || (held !== null && held >= BigInt(last.id))) {
      this.lost = null;
      return null;
    }
    // The marker was read before the database: a materialization may have committed in between. Its swap
    // sets the marker before its record commits, so a marker read now is at least what the database says.
    const now = await this.client.get(this.marker);
    if (now !== null && BigInt(now) >= BigInt(last.id)) {
      this.lost = null;
      return null;
    }
    this.lost = `Redis lost the materialized values (it holds ${held === null ? 'none' : `materialization ${held}`}, the database records ${last.id}): they are being rebuilt`;
    return last;
  }

  /** The watchdog's round: detect, and rebuild what was lost. */
  private async check(): Promise<void> {
    const last = await this.detect();
    if (!last || !this.rebuild) return;
    // One instance rebuilds; the others stay degraded until the marker is back.
    if ((await this.client.set(this.rebuildLock, this.instance, { NX: true, PX: 10 * 60_000 })) !== 'OK') return;
    try {
      await this.rebuild(last);
      this.lost = null;
    } finally {
      if ((await this.client.get(this.rebuildLock).catch(() => null)) === this.instance) await this.client.del(this.rebuildLock).catch(() => 0);
    }
  }

  private async loadPointers(): Promise<Map<string, Pointer>> {
    const all = await this.client.hGetAll(this.current);
    const fresh = new Map(Object.entries(all).map(([view, raw]) => [view, JSON.parse(raw) as Pointer] as const));
    this.pointers = fresh;
    return fresh;
  }

  /**
   * For each view's hash, whether it exists and the entity's value in it: one command, so one round trip
   * and one reply however many views the entity has. The script is sent once; Redis keeps it by its digest.
   */
  private async lookup(keys: string[], id: string): Promise<unknown[]> {
    const options = { keys, arguments: [id] };
    let reply: unknown;
    try {
      reply = await this.client.evalSha(LOOKUP_SHA, options);
    } catch (error) {
      if (!String(error).includes('NOSCRIPT')) throw error;
      reply = await this.client.eval(LOOKUP_SCRIPT, options);
    }
    if (!Array.isArray(reply)) throw new Error(`the online store's lookup script answered ${typeof reply}, not a list`);
    return reply as unknown[];
  }

  private async readRows(entityType: EntityType, id: string, attempt = 0): Promise<StoredOnlineRow[]> {
    if (this.lost) throw unavailable(this.lost);
    const known = attempt > 0 || !this.pointers ? await this.loadPointers() : this.pointers;
    const live = VIEW_DEFINITIONS.filter((v) => v.entity === entityType && known.has(v.name)).map((v) => ({ view: v.name, pointer: known.get(v.name)! }));
    if (live.length === 0 && attempt === 0) return this.readRows(entityType, id, 1);
    if (live.length === 0) {
      // Nothing in Redis at all: a store never materialized, or one that lost its values (found now, not
      // at the next watchdog round: the answer is 503, never 404).
      await this.detect();
      if (this.lost) throw unavailable(this.lost);
    }
    const rows: StoredOnlineRow[] = [];
    const found = await this.lookup(
      live.map((l) => l.pointer.key),
      id,
    );
    for (const [i, { view, pointer }] of live.entries()) {
      const exists = found[2 * i];
      const value = found[2 * i + 1];
      // The hash was replaced since its pointer was read: read again from the new pointers.
      if (exists !== 1 && attempt < 2) return this.readRows(entityType, id, attempt + 1);
      if (typeof value !== 'string') continue;
      const [featureTs, ...values] = JSON.parse(value) as [number, ...(number | null)[]];
      rows.push({
        view,
        version: pointer.version,
        materializationId: pointer.materializationId,
        materializedAt: new Date(pointer.materializedAt),
        asOf: new Date(pointer.asOf),
        featureTs: new Date(featureTs),
        values,
      });
    }
    return rows;
  }

  /** Fills fresh hashes, then swaps the pointers to them inside the database transaction that records the materialization. */
  private async publishNow(m: Parameters<OnlineStore['publish']>[0], rows: readonly OnlineRow[], at: Date): Promise<MaterializationRecord> {
    const keys = new Map(m.views.map((v) => [v.view, `${this.prefix}:v:${v.view}:${randomUUID()}`]));
    try {
      await this.fillFreshHashes(keys, rows);
      let replaced: string[] = [];
      const record = await this.store.recordMaterialization({ ...m, onlineStore: 'redis' }, null, at, async (id) => {
        replaced = await this.swapPointers(keys, m, id, at);
      });
      this.pointers = null;
      if (replaced.length > 0) await this.client.unlink(replaced);
      return record;
    } catch (error) {
      // Nothing points at the fresh hashes unless the swap committed.
      const live = new Set(((await this.client.hVals(this.current).catch(() => [])) as string[]).map((p) => (JSON.parse(p) as Pointer).key));
      const orphans = [...keys.values()].filter((k) => !live.has(k));
      if (orphans.length > 0) await this.client.unlink(orphans).catch(() => undefined);
      throw error;
    }
  }

  /** Each view's rows into its fresh hash, in batches, the hashes on their lease (renewed once more at the end). */
  private async fillFreshHashes(keys: ReadonlyMap<string, string>, rows: readonly OnlineRow[]): Promise<void> {
    for (const [view, key] of keys) {
      const entries = rows.filter((r) => r.view === view);
      for (let i = 0; i < entries.length; i += HSET_BATCH) {
        const batch: Record<string, string> = {};
        for (const r of entries.slice(i, i + HSET_BATCH)) batch[r.entityId] = JSON.stringify([r.featureTs, ...r.values]);
        await this.client.multi().hSet(key, batch).pExpire(key, FRESH_HASH_LEASE_MS).exec();
      }
    }
    const renew = this.client.multi();
    for (const key of keys.values()) renew.pExpire(key, FRESH_HASH_LEASE_MS);
    await renew.exec();
  }

  /**
   * Points every materialized view at its fresh hash, sets the marker to materialization `id` and makes the
   * fresh hashes permanent, in one MULTI; returns the hashes the pointers held before, to unlink.
   */
  private async swapPointers(keys: ReadonlyMap<string, string>, m: Parameters<OnlineStore['publish']>[0], id: string, at: Date): Promise<string[]> {
    const old = await this.client.hmGet(this.current, [...keys.keys()]);
    const replaced = old.filter((o): o is string => typeof o === 'string').map((o) => (JSON.parse(o) as Pointer).key);
    const swap: Record<string, string> = {};
    for (const v of m.views) {
      const pointer: Pointer = {
        key: keys.get(v.view)!,
        materializationId: id,
        version: v.version,
        asOf: m.asOf.toISOString(),
        materializedAt: at.toISOString(),
      };
      swap[v.view] = JSON.stringify(pointer);
    }
    const commit = this.client.multi().hSet(this.current, swap).set(this.marker, id);
    for (const key of keys.values()) commit.persist(key);
    await commit.exec();
    return replaced;
  }
}
