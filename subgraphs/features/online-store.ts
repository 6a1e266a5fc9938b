import { randomUUID } from 'node:crypto';
import type { EntityType } from './frame.js';
import { VIEW_DEFINITIONS } from './registry.js';
import type { EventHub } from '../../platform/event-hub.js';
import { MATERIALIZED_TOPIC, onlineKey, type FeaturesStore, type MaterializationRecord, type OnlineRow, type StoredOnlineRow } from './store.js';

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
  let closed = false;

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

  let stream: AsyncIterableIterator<unknown> | null = null;
  void (async () => {
    // A stream that fails (an overflow) is opened again; the reload after it catches up whatever was missed.
    while (!closed) {
      stream = events.stream(MATERIALIZED_TOPIC);
      try {
        for await (const event of stream) {
          void event;
          stale = true;
          await reload().catch(() => undefined);
        }
      } catch {
        stale = true;
      }
    }
  })();

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
      closed = true;
      await stream?.return?.();
      await loading?.catch(() => undefined);
    },
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
 * Redis layout (under a prefix): one hash per materialized view version, `<prefix>:v:<view>:<uuid>`,
 * entity id -> JSON [feature_ts, ...values]; and `<prefix>:current`, view -> pointer to the live hash.
 * A materialization fills fresh hashes first, then swaps every pointer in one MULTI/EXEC (inside the
 * database transaction that records it), then unlinks the hashes it replaced.
 */
export async function redisOnlineStore(url: string, prefix: string, store: FeaturesStore): Promise<OnlineStore> {
  // Loaded only when configured: a gateway without REDIS_URL never pays for the client's import.
  const { createClient } = await import('redis');
  const client = createClient({ url, socket: { connectTimeout: 2000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 2000) } });
  client.on('error', () => {
    // Reconnects by itself; commands fail meanwhile and are answered as errors.
  });
  await client.connect();
  const current = `${prefix}:current`;

  const read = async (entityType: EntityType, id: string, attempt = 0): Promise<StoredOnlineRow[]> => {
    const views = VIEW_DEFINITIONS.filter((v) => v.entity === entityType).map((v) => v.name);
    const pointers = await client.hmGet(current, views);
    const rows: StoredOnlineRow[] = [];
    const found = await Promise.all(
      pointers.map(async (raw, i) => {
        if (typeof raw !== 'string') return null;
        const pointer = JSON.parse(raw) as Pointer;
        const [exists, value] = await Promise.all([client.exists(pointer.key), client.hGet(pointer.key, id)]);
        return { view: views[i]!, pointer, exists: exists === 1, value };
      }),
    );
    for (const f of found) {
      if (!f) continue;
      // The hash was replaced between reading the pointer and the value: read again from the new pointers.
      if (!f.exists && attempt < 2) return read(entityType, id, attempt + 1);
      if (typeof f.value !== 'string') continue;
      const [featureTs, ...values] = JSON.parse(f.value) as [number, ...(number | null)[]];
      rows.push({
        view: f.view,
        version: f.pointer.version,
        materializationId: f.pointer.materializationId,
        materializedAt: new Date(f.pointer.materializedAt),
        asOf: new Date(f.pointer.asOf),
        featureTs: new Date(featureTs),
        values,
      });
    }
    return rows;
  };

  return {
    kind: 'redis',
    async publish(m, rows, at) {
      const keys = new Map(m.views.map((v) => [v.view, `${prefix}:v:${v.view}:${randomUUID()}`]));
      try {
        for (const [view, key] of keys) {
          const entries = rows.filter((r) => r.view === view);
          for (let i = 0; i < entries.length; i += HSET_BATCH) {
            const batch: Record<string, string> = {};
            for (const r of entries.slice(i, i + HSET_BATCH)) batch[r.entityId] = JSON.stringify([r.featureTs, ...r.values]);
            await client.hSet(key, batch);
          }
        }
        let replaced: string[] = [];
        const record = await store.recordMaterialization({ ...m, onlineStore: 'redis' }, null, at, async (id) => {
          const old = await client.hmGet(current, [...keys.keys()]);
          replaced = old.filter((o): o is string => typeof o === 'string').map((o) => (JSON.parse(o) as Pointer).key);
          const swap: Record<string, string> = {};
          for (const v of m.views) {
            const pointer: Pointer = { key: keys.get(v.view)!, materializationId: id, version: v.version, asOf: m.asOf.toISOString(), materializedAt: at.toISOString() };
            swap[v.view] = JSON.stringify(pointer);
          }
          await client.multi().hSet(current, swap).exec();
        });
        if (replaced.length > 0) await client.unlink(replaced);
        return record;
      } catch (error) {
        // Nothing points at the fresh hashes unless the swap committed.
        const live = new Set(((await client.hVals(current).catch(() => [])) as string[]).map((p) => (JSON.parse(p) as Pointer).key));
        const orphans = [...keys.values()].filter((k) => !live.has(k));
        if (orphans.length > 0) await client.unlink(orphans).catch(() => undefined);
        throw error;
      }
    },
    read: (entityType, id) => read(entityType, id),
    async ping() {
      await client.ping();
    },
    async close() {
      await client.close().catch(() => client.destroy());
    },
  };
}
