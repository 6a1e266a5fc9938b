import { fileURLToPath } from 'node:url';
import type { Clock } from './clock.js';
import { isDemoMode, sliceOf, type PlatformConfig } from './config.js';
import { openRuntimeDatabase, type Database } from './db.js';
import { EventHub } from './event-hub.js';
import type { EventRelay } from './event-relay.js';
import { databaseIdentity } from './database-identity.js';
import { pruneOutbox } from './outbox-retention.js';
import { periodic } from './periodic.js';
import { migrate } from './migrate.js';
import { createPeers } from './peers.js';
import { SubgraphTrust } from './subgraph-trust.js';
import { PrincipalSigner } from './principal.js';
import type { SubgraphInstance, SubgraphModule } from './subgraph.js';
import { traceStateAccess } from './state-trace.js';

const platformMigrations = { owner: 'platform', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) };

/** Subgraphs running in this process, on one database and one outbox reader. */
export interface SubgraphRuntime {
  db: Database;
  events: EventHub;
  /** The relay of the outbox to the event bus (EVENT_BUS_URL); null without one. */
  relay: EventRelay | null;
  instances: ReadonlyMap<string, SubgraphInstance>;
  /** The database's identity (platform/database-identity.ts): the lineage of its event log. */
  identity: string;
  close(): Promise<void>;
}

/**
 * Opens the database (PGlite under DATA_DIR, or DATABASE_URL), applies the platform's and the subgraphs'
 * migrations, starts the outbox reader and then each subgraph. The gateway runs it for its in-process
 * subgraphs; `npm run subgraph` runs it for one.
 */
export async function startSubgraphRuntime(args: {
  /** The whole configuration: platform's section is read here, and each subgraph is handed its own slice. */
  config: PlatformConfig & Readonly<Record<string, unknown>>;
  clock: Clock;
  modules: readonly SubgraphModule[];
  /**
   * The database, when its opening was started earlier (`npm start` opens it while the server's modules
   * load, gateway/main.ts). @default opened here (`openRuntimeDatabase`)
   */
  database?: Promise<Database>;
  /** A failed outbox read (retried by the next poll). */
  onError?: (error: unknown) => void;
  /** The database was found behind its own event stream (a restore): the ids it lost. */
  onRestore?: (range: { lostFrom: string; lostTo: string }) => void;
}): Promise<SubgraphRuntime> {
  const { config, clock, modules } = args;
  const db = await (args.database ?? openRuntimeDatabase(config));
  let events = new EventHub(db, {
    recent: config.EVENT_REPLAY_MEMORY,
    recentAgeMs: config.EVENT_REPLAY_MEMORY_AGE_S * 1000,
    ...(args.onError ? { onError: args.onError } : {}),
  });
  const instances = new Map<string, SubgraphInstance>();
  const peers = createPeers({
    local: () => instances,
    urls: config.SUBGRAPH_URLS,
    signer: PrincipalSigner.from(config.PRINCIPAL_SECRET),
    trust: new SubgraphTrust(new Map(Object.entries(config.SUBGRAPH_URLS)), { timeoutMs: config.PEER_TIMEOUT_MS }),
    timeoutMs: config.PEER_TIMEOUT_MS,
  });
  let relay: EventRelay | null = null;
  let identity = '';
  let pruner: { stop(): Promise<void> } | null = null;
  const close = async () => {
    await pruner?.stop();
    for (const instance of [...instances.values()].reverse()) await instance.close();
    await relay?.close();
    await events.close();
    await db.close();
  };
  try {
    await migrate(db, [platformMigrations, ...modules.flatMap((m) => m.migrations)]);
    identity = await databaseIdentity(db);
    if (config.EVENT_BUS_URL) {
      // The outbox relayed to JetStream, and this process's streams read from there. The NATS client loads
      // only then: a start without an event bus does not pay for it.
      const [{ EventRelay }, { JetStreamLog }] = await Promise.all([import('./event-relay.js'), import('./jetstream-log.js')]);
      relay = await EventRelay.start(db, identity, {
        url: config.EVENT_BUS_URL,
        stream: config.EVENT_STREAM,
        maxAgeS: config.EVENT_STREAM_MAX_AGE_S,
        maxBytes: config.EVENT_STREAM_MAX_BYTES,
        duplicateWindowS: config.EVENT_STREAM_DUPLICATE_WINDOW_S,
        ...(args.onError ? { onError: args.onError } : {}),
        ...(args.onRestore ? { onRestore: args.onRestore } : {}),
      });
      // A stream of another database's events is no log of this one's: subscribers then read the outbox
      // itself (as without an event bus) while /health says why nothing is relayed.
      if (!relay.refusing) {
        const log = await JetStreamLog.open({ url: config.EVENT_BUS_URL, stream: config.EVENT_STREAM });
        events = new EventHub(db, {
          log,
          recent: config.EVENT_REPLAY_MEMORY,
          recentAgeMs: config.EVENT_REPLAY_MEMORY_AGE_S * 1000,
          ...(args.onError ? { onError: args.onError } : {}),
        });
      }
    }
    await events.start();
    for (const module of modules) instances.set(module.name, await startModule(module, { db, identity, config, clock, events, peers }));
    // The outbox is bounded: pruned in short batches, never an event the bus has not received.
    const policies = modules.flatMap((m) => m.retention ?? []);
    const stream = config.EVENT_BUS_URL ? config.EVENT_STREAM : null;
    pruner = periodic(
      () =>
        pruneOutbox(db, {
          retentionS: config.OUTBOX_RETENTION_S,
          policies,
          relayedThrough: async () => {
            if (!stream) return null;
            const res = await db.query<{ position: string }>('SELECT position::text AS position FROM outbox_relay WHERE name = $1', [stream]);
            return BigInt(res.rows[0]?.position ?? '0');
          },
        }).catch((error: unknown) => args.onError?.(error)),
      config.OUTBOX_PRUNE_INTERVAL_MS,
    );
  } catch (error) {
    await close();
    throw error;
  }
  return { db, events, relay, instances, identity, close };
}

/** One subgraph on its database handle: its reads traced and its writes held to their events (platform/state-trace.ts). */
function startModule(
  module: SubgraphModule,
  deps: {
    db: Database;
    identity: string;
    config: PlatformConfig & Readonly<Record<string, unknown>>;
    clock: Clock;
    events: EventHub;
    peers: ReturnType<typeof createPeers>;
  },
): Promise<SubgraphInstance> {
  const { db, identity, config, clock, events, peers } = deps;
  return module.start({
    db: traceStateAccess(db, module.state ?? {}, `${module.name}_`, identity),
    config: sliceOf(module.config, config),
    demoMode: isDemoMode(config),
    clock,
    events,
    peers,
  });
}
