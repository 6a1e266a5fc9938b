import { ApolloGateway, type GraphQLDataSource } from '@apollo/gateway';
import type { FastifyBaseLogger } from 'fastify';
import type { PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphTrust } from '../../platform/subgraph-trust.js';
import { checkCustomScalars } from '../../platform/scalars.js';
import type { SubgraphInstance, SubgraphModule } from '../../platform/subgraph.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { skipRepeatedVariableValidation } from '../pipeline/bounded-errors.js';
import { collapsing } from './collapse.js';
import type { SourcesConfig } from './config.js';
import type { GatewayContext } from '../pipeline/context.js';
import { FetchCache } from './fetch-cache.js';
import { InProcessDataSource, setCompiledSubgraphExecution } from './in-process-data-source.js';
import { installCompiledExecution } from '../planner/plan-executor.js';
import { RemoteDataSource } from './remote-data-source.js';
import { StateCache } from './state-cache.js';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';

export interface FederatedGatewayOptions {
  config: SourcesConfig;
  /** The supergraph as the planner reads it (without the security directives it does not support). */
  supergraphSdl: string;
  modules: readonly SubgraphModule[];
  /** Subgraphs served by servers of their own (SUBGRAPH_URLS), by name. */
  remoteUrls: ReadonlyMap<string, string>;
  /** Subgraphs running in this process, by name. */
  local: ReadonlyMap<string, SubgraphInstance>;
  /** Signs the principal a call acts for (the only credential subgraph servers are sent); with remote subgraphs. */
  signer: PrincipalSigner | null;
  /** Which subgraph servers refuse unsigned calls: no other is routed to. */
  trust: SubgraphTrust;
  metrics: GatewayMetrics;
  log: FastifyBaseLogger;
  /** The event log this process reads (the local subgraphs', or the shared database's); null: no state is cached. */
  eventLog: { events: EventHub; identity: string } | null;
  /** Seconds an entry of a subgraph fetch document may live by its `@cacheControl` hints; null: no hint caps it. */
  cacheCap: (query: string) => number | null;
  /** The subgraphs' clock: what their answers' `validUntil` is given in. */
  clock: Clock;
}

export interface FederatedGateway {
  gateway: ApolloGateway;
  /**
   * Serves another supergraph (the planner's SDL): @apollo/gateway plans new requests against it, and Apollo
   * Server swaps its schema at once; requests in flight finish on the one they started with.
   */
  update(supergraphSdl: string): void;
  /** The data source of each subgraph, by name, once the gateway has loaded (subscriptions reuse them). */
  dataSources: ReadonlyMap<string, GraphQLDataSource>;
  fetchCache: FetchCache;
  /** State reads kept until a write changes them (gateway/sources/state-cache.ts); null when off or without an event log. */
  stateCache: StateCache | null;
  /** Closes the connections to subgraph servers. */
  close(): Promise<void>;
}

/**
 * The query planner and its data sources: each subgraph is reached in process or over HTTP, its fetches
 * timed, identical reads in flight collapsed (gateway/sources/collapse.ts), and answers that are functions
 * of the request alone kept (gateway/sources/fetch-cache.ts). Plans run on the compiled executor
 * (gateway/planner/plan-executor.ts).
 */
export function createFederatedGateway(options: FederatedGatewayOptions): FederatedGateway {
  const { config, remoteUrls, local, metrics, log } = options;
  const fetchCache = new FetchCache({ maxBytes: config.GATEWAY_FETCH_CACHE_MB * 1024 * 1024, maxAgeMs: config.GATEWAY_FETCH_CACHE_MAX_AGE_S * 1000 });
  const dataSources = new Map<string, GraphQLDataSource>();
  const stateCache = stateCacheOf(options);
  installCompiledExecution(config.GATEWAY_COMPILED_EXECUTION);
  setCompiledSubgraphExecution(config.SUBGRAPH_COMPILED_EXECUTION);
  const sourceOf = (name: string): GraphQLDataSource<GatewayContext> => {
    const url = remoteUrls.get(name);
    if (url) {
      if (!options.signer) throw new Error(`subgraph ${name} runs remotely, and calls to it cannot be signed without PRINCIPAL_SECRET`);
      return new RemoteDataSource(name, url, {
        timeoutMs: config.SUBGRAPH_TIMEOUT_MS,
        signer: options.signer,
        trust: options.trust,
        onFailure: (error) => log.warn({ subgraph: name, reason: String(error) }, 'subgraph unavailable'),
      });
    }
    const instance = local.get(name);
    if (instance) return new InProcessDataSource(name, instance, (error) => log.error({ err: error, subgraph: name }, 'subgraph fault'));
    throw new Error(`subgraph ${name} is in the supergraph but neither running here nor in SUBGRAPH_URLS`);
  };
  let update: ((supergraphSdl: string) => void) | null = null;
  // @apollo/gateway otherwise exports usage metrics to Apollo and probes cloud metadata endpoints as it is
  // made, and reads whether to only from this variable: the supergraph sends nothing off the machine
  // unless an operator opts in (docs/operations.md, "Telemetry").
  process.env['APOLLO_TELEMETRY_DISABLED'] ??= 'true';
  const gateway = new ApolloGateway({
    // A hook rather than the text: it hands over the function that serves another supergraph (reloads).
    supergraphSdl: async (hook) => {
      update = hook.update;
      return { supergraphSdl: options.supergraphSdl };
    },
    buildService: ({ name }) => {
      const source = sourceOf(name);
      dataSources.set(name, source);
      // Timed as made; identical reads in flight collapsed before that; answers that are functions of the
      // request alone kept before that; state reads kept, and writes' evictions applied, before that.
      const measured = metrics.measured(name, source);
      const collapsed = config.GATEWAY_COLLAPSE_FETCHES ? collapsing(measured, metrics.collapsedFetch(name), () => stateCache?.epoch ?? 0) : measured;
      const pure = fetchCache.wrap(name, options.modules.find((m) => m.name === name)?.pure, collapsed);
      return stateCache ? stateCache.wrap(name, pure) : pure;
    },
    logger: log,
    // Deferred fragments are planned as fetches of their own (gateway/planner/plan-executor.ts runs them).
    queryPlannerConfig: { incrementalDelivery: { enableDefer: true } },
  });
  gateway.onSchemaLoadOrUpdate(({ apiSchema }) => checkCustomScalars(apiSchema));
  registerFetchCacheGauges(metrics, fetchCache);
  skipRepeatedVariableValidation(gateway);
  return {
    gateway,
    update(supergraphSdl) {
      if (!update) throw new Error('the gateway has not loaded its first supergraph yet');
      update(supergraphSdl);
    },
    dataSources,
    fetchCache,
    stateCache,
    async close() {
      for (const source of dataSources.values()) if (source instanceof RemoteDataSource) await source.close();
    },
  };
}

/** The state cache, when it is on and an event log is read here. */
function stateCacheOf({ config, eventLog, cacheCap, clock, log }: FederatedGatewayOptions): StateCache | null {
  if (config.STATE_CACHE_MB === 0 || !eventLog) return null;
  const { events, identity } = eventLog;
  return new StateCache({
    maxBytes: config.STATE_CACHE_MB * 1024 * 1024,
    tenantShare: config.STATE_CACHE_TENANT_SHARE_PERCENT / 100,
    maxLagMs: config.STATE_CACHE_MAX_LAG_MS,
    waitMs: config.STATE_CACHE_WAIT_MS,
    maxAgeMs: config.STATE_CACHE_MAX_AGE_S * 1000,
    newest: () => events.newestWritten(),
    delivered: () => events.delivered,
    wake: () => events.wake(),
    capOf: cacheCap,
    wallClock: () => clock.now().getTime(),
    lineage: identity,
    onLineageLost: (message) => log.error(message),
  });
}

/** The fetch cache's gauges: reads by result per subgraph, and the bytes it holds. */
function registerFetchCacheGauges(metrics: GatewayMetrics, fetchCache: FetchCache): void {
  metrics.gauge({
    name: 'subgraph_fetch_cache_reads_total',
    help: 'Pure subgraph reads answered from the gateway fetch cache (hit) or fetched (miss), since start',
    labelNames: ['subgraph', 'result'],
    collect: (gauge) => {
      for (const [subgraph, n] of fetchCache.stats.hits) gauge.set({ subgraph, result: 'hit' }, n);
      for (const [subgraph, n] of fetchCache.stats.misses) gauge.set({ subgraph, result: 'miss' }, n);
    },
  });
  metrics.gauge({
    name: 'subgraph_fetch_cache_bytes',
    help: 'Memory held by the gateway fetch cache (keys and answers as text)',
    collect: (gauge) => gauge.set(fetchCache.snapshot().bytes),
  });
}
