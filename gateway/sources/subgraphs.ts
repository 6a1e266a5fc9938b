import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { systemClock, type Clock } from '../../platform/clock.js';
import { ConfigError, platformConfig, sectionOf, type PlatformConfig } from '../../platform/config.js';
import { closeOpening, openRuntimeDatabase, type Database } from '../../platform/db.js';
import { EventHub } from '../../platform/event-hub.js';
import { databaseIdentity, restoreMessage } from '../../platform/database-identity.js';
import { PrincipalSigner } from '../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../platform/runtime.js';
import type { SubgraphInstance, SubgraphModule } from '../../platform/subgraph.js';
import { SubgraphTrust, UntrustedSubgraph } from '../../platform/subgraph-trust.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { sourcesConfig, type SourcesConfig } from './config.js';

/*
 * The subgraphs a process serves: those that run in it, on their database (platform/runtime.ts), and
 * those served by servers of their own (SUBGRAPH_URLS), reached with the caller's principal signed and
 * only while they refuse unsigned calls.
 */

export interface SubgraphsOptions {
  config: PlatformConfig & SourcesConfig & Readonly<Record<string, unknown>>;
  /** Every subgraph of the supergraph. */
  modules: readonly SubgraphModule[];
  /**
   * `SUBGRAPH_URLS`: the subgraphs it names are served by servers of their own (a gateway); `none`: every
   * module runs here, SUBGRAPH_URLS naming only the peers they ask (a subgraph server).
   */
  remote: 'SUBGRAPH_URLS' | 'none';
  /** Source of "now" for every time rule. @default the system clock */
  clock?: Clock;
  /** The database, when its opening was started before the server's modules loaded. @default opened here */
  database?: Promise<Database>;
  /** Where the subgraphs' warm-up tasks go (run after the other parts', once the server listens). */
  warmUp: { add(name: string, run: () => void): void };
  /** The registry their gauges go to; null where there are no metrics (a subgraph server). */
  metrics: GatewayMetrics | null;
}

/** What the `subgraphs` part decorates the app with. */
interface Subgraphs {
  modules: readonly SubgraphModule[];
  remoteUrls: ReadonlyMap<string, string>;
  /** The subgraphs running in this process, by name. */
  local: ReadonlyMap<string, SubgraphInstance>;
  /** Their database, event hub and relay; null when every subgraph runs on its own. */
  runtime: SubgraphRuntime | null;
  /**
   * The event log this process reads, and its database: the local subgraphs', or (every subgraph remote)
   * the shared database at DATABASE_URL when the state cache is on; null: none (no state is cached).
   */
  log: { db: Database; events: EventHub; identity: string } | null;
  /** Signs the principal each call acts for, with PRINCIPAL_SECRET; null without one. */
  signer: PrincipalSigner | null;
  /** Which subgraph servers refuse unsigned calls (platform/subgraph-trust.ts). */
  trust: SubgraphTrust;
}

/**
 * The `subgraphs` part (`app.subgraphs`): starts the local subgraphs on their database, closed with the
 * app; asks each subgraph server whether it refuses unsigned calls; their gauges and warm-up tasks. The
 * database handed in is this part's from the start: closed here when the part fails before the subgraphs
 * take it, or when no subgraph runs here.
 */
export const subgraphsPlugin = fp(
  async (app: FastifyInstance, options: SubgraphsOptions) => {
    let config: PlatformConfig & SourcesConfig;
    let remoteUrls: ReadonlyMap<string, string>;
    try {
      config = { ...sectionOf(platformConfig, options.config, 'subgraphs'), ...sectionOf(sourcesConfig, options.config, 'subgraphs') };
      remoteUrls = options.remote === 'none' ? new Map() : remoteSubgraphs(config, options.modules);
    } catch (error) {
      await closeOpening(options.database);
      throw error;
    }
    const local = options.modules.filter((m) => !remoteUrls.has(m.name));
    const logOnly = local.length === 0 ? await openLogOnly(app, config, options.database) : null;
    const runtime =
      local.length === 0
        ? null
        : await startSubgraphRuntime({
            config: options.config,
            clock: options.clock ?? systemClock,
            modules: local,
            ...(options.database ? { database: options.database } : {}),
            onError: (error) => app.log.warn({ err: error }, 'outbox read failed; retrying'),
            onRestore: (lost) => app.log.warn({ lost }, restoreMessage(lost)),
          });
    if (runtime) app.addHook('onClose', () => runtime.close());
    const subgraphs: Subgraphs = {
      modules: options.modules,
      remoteUrls,
      local: runtime?.instances ?? new Map(),
      runtime,
      log: runtime ? { db: runtime.db, events: runtime.events, identity: runtime.identity } : logOnly,
      signer: PrincipalSigner.from(config.PRINCIPAL_SECRET),
      trust: subgraphTrust(remoteUrls, config.SUBGRAPH_TIMEOUT_MS, app.log),
    };
    app.decorate('subgraphs', subgraphs);
    // The subgraphs' own warm-up runs after every other part's (added once all are registered).
    app.addHook('onReady', async () => {
      for (const [name, instance] of subgraphs.local) if (instance.warmUp) options.warmUp.add(`subgraph ${name}`, () => instance.warmUp!());
    });
    if (options.metrics) registerGauges(options.metrics, subgraphs);
  },
  { name: 'subgraphs', fastify: '5.x' },
);

/**
 * With every subgraph remote, the event log the state cache reads: the shared database at DATABASE_URL (its
 * subgraph servers' own), read only. Without DATABASE_URL, or with the state cache off, none: the database
 * opened early is closed. A log that cannot be read at start (its tables not made yet) is said and not used.
 */
async function openLogOnly(
  app: FastifyInstance,
  config: PlatformConfig & SourcesConfig,
  opening: Promise<Database> | undefined,
): Promise<{ db: Database; events: EventHub; identity: string } | null> {
  if (!config.DATABASE_URL || config.STATE_CACHE_MB === 0) {
    await (await opening)?.close();
    return null;
  }
  const db = await (opening ?? openRuntimeDatabase(config));
  const events = new EventHub(db, { onError: (error) => app.log.warn({ err: error }, 'event log read failed; retrying') });
  let identity: string;
  try {
    identity = await databaseIdentity(db);
    await events.start();
  } catch (error) {
    app.log.warn({ err: error }, 'the event log at DATABASE_URL cannot be read (are its subgraph servers migrated?): no state is cached');
    await db.close();
    return null;
  }
  app.addHook('onClose', async () => {
    await events.close();
    await db.close();
  });
  return { db, events, identity };
}

/** SUBGRAPH_URLS, checked: each names a known subgraph, and signed calls are possible where they are needed. */
function remoteSubgraphs(config: Pick<PlatformConfig, 'SUBGRAPH_URLS' | 'PRINCIPAL_SECRET'>, modules: readonly SubgraphModule[]): ReadonlyMap<string, string> {
  const remoteUrls = new Map(Object.entries(config.SUBGRAPH_URLS));
  const unknown = [...remoteUrls.keys()].filter((name) => !modules.some((m) => m.name === name));
  if (unknown.length > 0) {
    throw new ConfigError([`SUBGRAPH_URLS: no subgraph named ${unknown.join(', ')} (known: ${modules.map((m) => m.name).join(', ')})`]);
  }
  if (remoteUrls.size > 0 && !config.PRINCIPAL_SECRET) {
    throw new ConfigError([
      'PRINCIPAL_SECRET: needed with SUBGRAPH_URLS: the gateway signs whom each call acts for, and subgraph servers serve only signed calls (the same 32+ characters in every process; e.g. PRINCIPAL_SECRET=$(openssl rand -base64 32))',
    ]);
  }
  return remoteUrls;
}

/**
 * Which subgraph servers refuse a call nobody signed (platform/subgraph-trust.ts), asked at start without
 * holding it up; a server that answers one is logged as an error and not routed to until it refuses.
 */
function subgraphTrust(remoteUrls: ReadonlyMap<string, string>, timeoutMs: number, log: FastifyBaseLogger): SubgraphTrust {
  // The question waits as long as a call would (SUBGRAPH_TIMEOUT_MS): a busy server is not an untrusted one.
  const trust = new SubgraphTrust(remoteUrls, {
    timeoutMs,
    onVerdict: (subgraph, verdict) => {
      if (verdict === 'accepts-unsigned') log.error({ subgraph }, new UntrustedSubgraph(subgraph, verdict).message);
      else if (verdict === 'refuses-unsigned') log.info({ subgraph }, `subgraph ${subgraph} refuses unsigned calls: routed to`);
    },
  });
  if (remoteUrls.size > 0) void trust.checkAll();
  return trust;
}

/** The gauges of the local subgraphs: the outbox and relay lag, the database pool and read cache, readiness. */
function registerGauges(metrics: GatewayMetrics, { runtime, local }: Subgraphs): void {
  const relay = () => (runtime?.relay ? runtime.relay.status().catch(() => null) : Promise.resolve(null));
  metrics.gauge({
    name: 'outbox_lag_events',
    help: 'Newest outbox event id minus the last one this process handed to its streams',
    collect: async (gauge) => {
      const lag = runtime ? await runtime.events.lag().catch(() => null) : null;
      if (lag !== null) gauge.set(Number(lag));
    },
  });
  const relayGauges: Array<[string, string, (status: NonNullable<Awaited<ReturnType<typeof relay>>>) => number | null]> = [
    ['event_relay_lag_events', 'Outbox events not yet relayed to the event bus stream', (s) => s.lagEvents],
    ['event_relay_lag_seconds', 'Age of the oldest outbox event not yet relayed to the event bus stream', (s) => s.lagSeconds],
    [
      'event_relay_lineage_mismatch',
      "1 while the event bus stream holds another database's events (nothing is relayed; see /health)",
      (s) => (s.lineage === 'foreign' ? 1 : 0),
    ],
    ['event_stream_bytes', 'Size of the event bus stream as JetStream last reported it', (s) => s.streamBytes ?? null],
  ];
  for (const [name, help, read] of relayGauges) {
    metrics.gauge({
      name,
      help,
      collect: async (gauge) => {
        const status = await relay();
        const value = status ? read(status) : null;
        if (value !== null) gauge.set(value);
      },
    });
  }
  metrics.gauge({
    name: 'db_pool_connections',
    help: 'PostgreSQL pool connections by state (open, idle) and queries waiting for one',
    labelNames: ['state'],
    collect: (gauge) => {
      const stats = runtime?.db.poolStats();
      if (!stats) return;
      gauge.set({ state: 'open' }, stats.total);
      gauge.set({ state: 'idle' }, stats.idle);
      gauge.set({ state: 'waiting' }, stats.waiting);
    },
  });
  metrics.gauge({
    name: 'db_read_cache_reads_total',
    help: 'Cacheable PGlite reads answered from the read cache (hit) or run (miss), since start',
    labelNames: ['result'],
    collect: (gauge) => {
      const stats = runtime?.db.readCacheStats();
      if (!stats) return;
      gauge.set({ result: 'hit' }, stats.hits);
      gauge.set({ result: 'miss' }, stats.misses);
    },
  });
  metrics.gauge({
    name: 'db_read_cache_entries',
    help: 'Answers kept by the PGlite read cache (all dropped at every write)',
    collect: (gauge) => {
      const stats = runtime?.db.readCacheStats();
      if (stats) gauge.set(stats.entries);
    },
  });
  metrics.gauge({
    name: 'subgraph_ready',
    help: 'Subgraphs in this process ready to serve (1) or degraded (0): a database down, an online store lost or unreachable',
    labelNames: ['subgraph'],
    collect: async (gauge) => {
      const ready = await Promise.all([...local].map(async ([name, s]) => [name, await s.ready().catch(() => false)] as const));
      for (const [subgraph, isReady] of ready) gauge.set({ subgraph }, isReady ? 1 : 0);
    },
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The subgraphs served: in this process (on their database) and on servers of their own. */
    subgraphs: Subgraphs;
  }
}
