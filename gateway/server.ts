import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import { systemClock, type Clock } from '../platform/clock.js';
import { ConfigError, isDemoMode } from '../platform/config.js';
import { type Config } from './config.js';
import { openDatabase, type Database } from '../platform/db.js';
import { migrate } from '../platform/migrate.js';
import { registerUsageRoute } from './governance/route.js';
import { MemoryUsageStore, SqlUsageStore, USAGE_MIGRATIONS, UsageRecorder, type UsageStore } from './governance/usage.js';
import type { EventHub } from '../platform/event-hub.js';
import type { EventRelay } from '../platform/event-relay.js';
import { restoreMessage } from '../platform/lineage.js';
import { isOperator, PrincipalSigner } from '../platform/principal.js';
import { SubgraphTrust, UntrustedSubgraph } from '../platform/subgraph-trust.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../platform/runtime.js';
import type { SubgraphInstance, SubgraphModule } from '../platform/subgraph.js';
import { readCheckedInSupergraph } from '../schema/supergraph-file.js';
import { subgraphs as allSubgraphs } from '../subgraphs/registry.js';
import { createFederatedGateway, type FederatedGateway } from './execution/federated-gateway.js';
import { loadGraphQLJit } from './execution/in-process-data-source.js';
import { startGraphQLServer } from './graphql/apollo.js';
import { DocumentRegistry, documentStep } from './graphql/documents.js';
import { ServedSupergraph, type ReloadResult } from './graphql/served-supergraph.js';
import { ManifestError } from './graphql/manifests.js';
import { registerGraphQLRoute } from './graphql/route.js';
import { TurnGate } from './http/admission.js';
import { createHttpApp, listenOrClose, type HttpApp } from './http/app.js';
import { WarmUp } from './http/warm-up.js';
import { registerDashboard } from './http/dashboard.js';
import { assertPortFree } from './http/port.js';
import { registerGatewayHealth } from './observability/health.js';
import { GatewayMetrics, type FetchCacheReadings } from './observability/metrics.js';
import { registerRest } from './rest/plugin.js';
import { auditPolicy, type AuditSink } from './security/audit.js';
import { authorizationPolicy } from './security/authorization.js';
import { boundedVariablesPolicy } from './execution/bounded-errors.js';
import { requestErrorPolicy } from './execution/graphql-errors.js';
import { createPipeline, graphqlValidation, type Pipeline } from './execution/pipeline.js';
import { usagePolicy } from './governance/policy.js';
import { createAuthenticator, type Authenticator } from './security/auth.js';
import { BrowserOrigins } from './security/cors.js';
import { registerEdgeGuard } from './security/edge-guard.js';
import { requestLimitsOf } from './security/limits.js';
import { RateLimiter, rateHeaders, rateLimitPolicy } from './security/rate-limit.js';
import { refuse } from './http/problem.js';
import { SubscriptionExecutor } from './subscriptions/executor.js';
import { inProcessUpstream } from './subscriptions/in-process-upstream.js';
import { remoteUpstream } from './subscriptions/remote-upstream.js';
import { HttpStreams } from './subscriptions/http-streams.js';
import { attachGraphQLWebSocket } from './subscriptions/ws-server.js';

export interface ServerOptions {
  config: Config;
  /** Source of "now" for every time rule. @default the system clock */
  clock?: Clock;
  /** The subgraphs to serve. @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
  /**
   * The in-process subgraphs' database, when its opening was started earlier (`npm start` starts it before
   * the server's modules load). Closed here when every subgraph is remote. @default opened by the start
   */
  database?: Promise<Database>;
  /** Where the audit trail of state changes goes (gateway/security/audit.ts). @default the server log, as `audit` lines */
  audit?: AuditSink;
}

export interface RunningServer {
  app: FastifyInstance;
  /** The database of the in-process subgraphs; null when every subgraph runs on its own (distributed). */
  db: Database | null;
  events: EventHub | null;
  /** The relay of the in-process subgraphs' outbox to the event bus (EVENT_BUS_URL); null without one. */
  relay: EventRelay | null;
  /** Federated subscriptions (shared upstream streams). */
  subscriptions: SubscriptionExecutor;
  /** The subgraphs running in this process, by name (tests reach `_entities` through their schemas). */
  subgraphs: ReadonlyMap<string, SubgraphInstance>;
  /** Base URL, e.g. http://127.0.0.1:4000 */
  url: string;
  /** Every route the server registered, with its methods (the doors of HTTP requests). */
  routes(): Array<{ url: string; methods: string[]; public: boolean }>;
  /** The operation pipeline every door runs, with the steps it applies (gateway/execution/pipeline.ts). */
  pipeline: Pipeline;
  /**
   * Reads SUPERGRAPH_FILE (or the checked-in supergraph) again and serves it (`SIGHUP`, or the file changing):
   * built and checked whole first; on a failure the supergraph served before stays (gateway/graphql/served-supergraph.ts).
   */
  reloadSupergraph(): ReloadResult;
  /**
   * Reads TRUSTED_DOCUMENTS_DIR again (`SIGHUP`): every manifest checked before any is served; on a failure
   * the documents served before stay, and the error names the file and operation.
   */
  reloadDocuments(): { ok: true; clients: number } | { ok: false; error: string };
  /**
   * Reads API_KEYS_FILE again (`SIGHUP`), checked whole first (on a failure the keys before stay), then ends
   * every open WebSocket and HTTP stream whose key is gone: how many.
   */
  reloadKeys(): Promise<{ ok: true; keys: number; ended: number } | { ok: false; error: string }>;
  close(): Promise<void>;
}

/**
 * Starts the supergraph: the gateway with GraphQL over HTTP and WebSocket, REST and health, and every
 * subgraph not named in SUBGRAPH_URLS in the same process (all of them by default). The parts, in the order
 * a request meets them: the HTTP app (gateway/http/app.ts), the edge guard (gateway/security/edge-guard.ts),
 * then /graphql, the REST paths, the probes, the dashboard and the WebSocket, each registered by its room.
 * Longer than most functions: it is the composition root, one step per room, each closer added as its part
 * is made, and reads best top to bottom in that order.
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { config } = options;
  const modules = options.subgraphs ?? allSubgraphs;
  const remoteUrls = remoteSubgraphs(config, modules);
  const turns = new TurnGate();
  const http = createHttpApp(config, { beforeParse: () => turns.enter() });
  const { app, closers } = http;
  // A busy port is reported before the slow part of the start (database, migrations, gateway).
  await assertPortFree(config.HOST, config.PORT);
  const local = modules.filter((m) => !remoteUrls.has(m.name));
  if (local.length === 0) await (await options.database)?.close();
  const runtime = await startLocalSubgraphs(config, local, options.clock ?? systemClock, app.log, options.database);
  if (runtime) closers.add(() => runtime.close());
  const byName: ReadonlyMap<string, SubgraphInstance> = runtime?.instances ?? new Map();
  // The caller's principal travels to subgraph servers signed with the secret they share: the only
  // credential they are sent. A server that answers a call nobody signed is not routed to.
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  const trust = subgraphTrust(remoteUrls, config.SUBGRAPH_TIMEOUT_MS, app.log);
  const auth = createAuthenticator(config);

  // Sources are read at scrape time; the WebSocket server and subscriptions are attached last.
  const late: LateSources = { ws: null, subscriptions: null, fetchCache: null, streams: null };
  const metrics = gatewayMetrics(runtime, turns, late);
  metrics.instrument(app);

  // @apollo/gateway otherwise exports usage metrics to Apollo and probes cloud metadata endpoints at
  // start; the supergraph sends nothing off the machine unless an operator opts in (docs/operations.md, "Telemetry").
  process.env['APOLLO_TELEMETRY_DISABLED'] ??= 'true';
  // Who may use which field is declared in the supergraph (gateway/security/authorization.ts); the planners
  // get it without those SECURITY features, which they do not support.
  // SUPERGRAPH_FILE, or the checked-in supergraph; served through ServedSupergraph, which a reload swaps whole.
  const served = ServedSupergraph.initial(readSupergraph(config), requestLimitsOf(config));
  const { authorizer, limiter, cachePolicies } = served;
  const supergraphSdl = served.plannerSdl;
  const rateLimiter = new RateLimiter({ perSecond: config.RATE_LIMIT_PER_S, burst: config.RATE_LIMIT_BURST });
  const federated = createFederatedGateway({ config, supergraphSdl, modules, remoteUrls, local: byName, signer, trust, metrics, log: app.log });
  closers.add(() => federated.close());
  late.fetchCache = federated.fetchCache;
  const { subscriptions, close: closeUpstreams } = subscriptionExecutor(config, {
    remoteUrls,
    local: byName,
    signer,
    trust,
    supergraphSdl,
    federated,
    log: app.log,
  });
  closers.add(closeUpstreams);
  late.subscriptions = subscriptions;
  served.attach(federated, subscriptions);
  // The schema clients see now (with @defer): registered documents are checked against it.
  const servedSchema = served.schema;
  // Which client used which coordinate (gateway/governance/usage.ts), flushed to the database.
  const usage = config.USAGE_RECORDING ? await startUsage(config, runtime?.db ?? null, servedSchema, app.log, closers) : null;
  let documents: DocumentRegistry;
  try {
    documents = trustedDocuments(config, servedSchema(), modules, metrics);
  } catch (error) {
    await closers.close().catch(() => undefined);
    throw error;
  }
  // The one operation pipeline every door runs (gateway/execution/pipeline.ts), each step declared here.
  const pipeline = createPipeline(
    {
      documents: documentStep(documents),
      limits: limiter,
      validation: graphqlValidation(),
      authorization: authorizationPolicy(authorizer),
      rate: rateLimitPolicy(rateLimiter),
      audit: auditPolicy(options.audit ?? ((entry) => app.log.info({ audit: entry }, 'audit'))),
      usage: usage ? usagePolicy(usage) : { notApplied: 'USAGE_RECORDING=false' },
    },
    // What every execution does first: the request's refusals, bounded variable errors, and a turn of the
    // event loop before the operation is read.
    [requestErrorPolicy(), boundedVariablesPolicy(), { started: () => turns.enter() }],
  );
  const graphql = await startGraphQLServer({ app, config, gateway: federated.gateway, authorizer, pipeline });
  closers.add(() => graphql.apollo.stop());

  const browserOrigins = new BrowserOrigins(config.CORS_ORIGINS);
  registerEdgeGuard(app, { routes: http.routes, auth, browserOrigins, rateLimiter });
  const streams = new HttpStreams({
    gate: { schema: servedSchema, pipeline },
    subscriptions,
    execute: graphql.executeOnSocket,
    maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
    maxPerPrincipal: config.HTTP_MAX_STREAMS_PER_PRINCIPAL,
    heartbeatMs: config.HTTP_STREAM_HEARTBEAT_MS,
  });
  late.streams = streams;
  await registerGraphQLRoute(app, graphql, { pipeline, cachePolicies, streams });
  const warmUp = new WarmUp();
  const rest = registerRest(app, { modules, execute: graphql.execute, authorizer, pipeline, keysRequired: auth.enabled });
  warmUp.add('openapi', rest.openApiDocument);
  warmUp.add('subscription planner', () => subscriptions.warm());
  warmUp.add('graphql-jit', () => void loadGraphQLJit());
  for (const [name, instance] of byName) if (instance.warmUp) warmUp.add(`subgraph ${name}`, () => instance.warmUp!());
  registerUsageRoute(app, { usage, schema: servedSchema, retentionMs: config.USAGE_RETENTION_DAYS * 86_400_000, supergraphSdl: () => served.sdl });
  registerGatewayHealth(app, {
    names: modules.map((m) => m.name),
    remoteUrls,
    local: byName,
    trust,
    callerIsOperator: (request) => callerIsOperator(auth, request),
    demoMode: isDemoMode(config),
    admit: healthProbeAdmission(),
    database: () => runtime?.db.kind ?? null,
    relay: () => runtime?.relay ?? null,
    websocket: () => late.ws ?? NO_SOCKETS,
    supergraph: () => served.status(),
    warmUp: () => warmUp.report(),
  });
  // The operations dashboard at / (public files; its data comes over the GraphQL WebSocket, with a key when one is needed).
  registerDashboard(app);

  await app.ready();
  closers.add(() => app.close());
  // Streams over HTTP end before the app closes (it waits for its connections).
  closers.add(() => streams.close());
  const socket = attachGraphQLWebSocket({
    ...socketSettings(config),
    server: app.server,
    path: '/graphql',
    schema: servedSchema,
    auth,
    subscriptions,
    execute: graphql.executeOnSocket,
    pipeline,
    rateLimiter,
    browserOrigins,
  });
  closers.add(() => socket.close());
  late.ws = socket;
  // Every open WebSocket and HTTP stream has its credential checked again every AUTH_RECHECK_S (and after a
  // keys file reload): a key removed, a token whose signing key left the JWKS, ends them.
  const recheckCredentials = async () => {
    if (!auth.enabled) return 0;
    const [sockets, streamed] = await Promise.all([socket.recheck(), streams.recheck(auth)]);
    return sockets + streamed;
  };
  const recheckTimer = setInterval(() => {
    recheckCredentials().catch((error: unknown) => app.log.warn({ err: error }, 'credential recheck failed'));
  }, config.AUTH_RECHECK_S * 1000);
  recheckTimer.unref();
  closers.add(() => clearInterval(recheckTimer));

  const reloadSupergraph = (): ReloadResult => {
    let sdl: string;
    try {
      sdl = readSupergraph(config);
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : String(error) };
    }
    return served.reload(sdl);
  };
  // A supergraph file is served anew when it changes (checked every SUPERGRAPH_POLL_MS by its size and time).
  const file = config.SUPERGRAPH_FILE;
  if (file) {
    const changed = () => {
      const result = reloadSupergraph();
      if (!result.ok) app.log.error(`supergraph not reloaded from ${file}, the previous one is still served: ${result.error}`);
      else if (!result.unchanged)
        app.log.info(`supergraph ${result.hash} served from ${file}; ${result.subscriptionsEnded} subscriptions it no longer allows ended`);
    };
    watchFile(file, { interval: config.SUPERGRAPH_POLL_MS, persistent: false }, changed);
    closers.add(() => unwatchFile(file, changed));
  }

  const url = await listenOrClose(http, config);
  if (isDemoMode(config)) {
    app.log.warn(
      `demo mode on ${config.HOST}: no credential is configured (API_KEYS, API_KEYS_FILE, AUTH_JWKS_URL), so every caller acts as the demo principal, holding every scope`,
    );
  }
  warmUp.start((name, error) => app.log.warn({ err: error, task: name }, 'warm-up task failed; it is made on first use'));
  return {
    app,
    db: runtime?.db ?? null,
    events: runtime?.events ?? null,
    relay: runtime?.relay ?? null,
    subscriptions,
    subgraphs: byName,
    url,
    routes: () => http.routes.list(),
    pipeline,
    reloadSupergraph,
    reloadKeys: async () => {
      const result = auth.reloadKeys();
      if (!result.ok) return result;
      return { ...result, ended: await recheckCredentials() };
    },
    reloadDocuments: () => {
      if (!config.TRUSTED_DOCUMENTS_DIR) return { ok: false, error: 'TRUSTED_DOCUMENTS_DIR is not set: there is no folder to read' };
      try {
        documents.loadFolder(config.TRUSTED_DOCUMENTS_DIR, servedSchema());
        return { ok: true, clients: documents.clientCount };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      }
    },
    close: () => closers.close(),
  };
}

/**
 * Persisted queries and trusted documents (gateway/graphql/documents.ts): the REST routes' operations under
 * their own client, then the manifests of TRUSTED_DOCUMENTS_DIR; a manifest that does not load stops the start.
 */
function trustedDocuments(config: Config, schema: GraphQLSchema, modules: readonly SubgraphModule[], metrics: GatewayMetrics): DocumentRegistry {
  const mode = config.TRUSTED_DOCUMENTS ?? (isDemoMode(config) ? 'off' : 'allow');
  const documents = new DocumentRegistry({ mode, apqBytes: config.APQ_CACHE_MB * 1024 * 1024, registry: metrics.registry });
  documents.registerRest(
    modules.flatMap((m) => m.routes.map((r) => ({ operation: r.operation }))),
    schema,
  );
  if (config.TRUSTED_DOCUMENTS_DIR) {
    try {
      documents.loadFolder(config.TRUSTED_DOCUMENTS_DIR, schema);
    } catch (error) {
      if (error instanceof ManifestError) throw new ConfigError([`TRUSTED_DOCUMENTS_DIR: ${error.message}`]);
      throw new ConfigError([`TRUSTED_DOCUMENTS_DIR: ${String(error)}`]);
    }
  }
  return documents;
}

/**
 * Field usage: counted in memory, added up every USAGE_FLUSH_S and at close in the subgraphs' database when
 * they run in this process, otherwise in DATABASE_URL's (its own table), or, for a gateway without a
 * database, in this process's memory (counts then last as long as the process).
 */
async function startUsage(
  config: Config,
  shared: Database | null,
  schema: () => GraphQLSchema,
  log: FastifyBaseLogger,
  closers: HttpApp['closers'],
): Promise<UsageRecorder> {
  let store: UsageStore;
  if (shared || config.DATABASE_URL) {
    const db = shared ?? (await openDatabase({ url: config.DATABASE_URL, schema: config.DATABASE_SCHEMA, queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT_MS }));
    if (!shared) closers.add(() => db.close());
    await migrate(db, [USAGE_MIGRATIONS]);
    store = new SqlUsageStore(db);
  } else {
    store = new MemoryUsageStore();
  }
  const usage = new UsageRecorder({
    store,
    schema,
    bucketMs: config.USAGE_BUCKET_S * 1000,
    retentionMs: config.USAGE_RETENTION_DAYS * 86_400_000,
    maxOperations: config.USAGE_MAX_OPERATIONS,
    onError: (error) => log.warn({ err: error }, 'field usage not flushed; kept for the next flush'),
  });
  const timer = setInterval(() => void usage.flush(), config.USAGE_FLUSH_S * 1000);
  timer.unref();
  closers.add(async () => {
    clearInterval(timer);
    await usage.flush();
  });
  return usage;
}

/** The supergraph to serve: SUPERGRAPH_FILE when set, else the one checked in with the code. */
function readSupergraph(config: Config): string {
  return config.SUPERGRAPH_FILE ? readFileSync(config.SUPERGRAPH_FILE, 'utf8') : readCheckedInSupergraph();
}

/** SUBGRAPH_URLS, checked: each names a known subgraph, and signed calls are possible where they are needed. */
function remoteSubgraphs(config: Config, modules: readonly SubgraphModule[]): ReadonlyMap<string, string> {
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

/** Whether a public route's request presents an operator's credential (a wrong one is simply not one). */
async function callerIsOperator(auth: Authenticator, request: FastifyRequest): Promise<boolean> {
  if (!auth.enabled) return isOperator(auth.publicPrincipal);
  if (request.headers['x-api-key'] === undefined && request.headers.authorization === undefined) return false;
  const result = await auth.authenticate(request.headers);
  return 'principal' in result && isOperator(result.principal);
}

/** Health probes one client address may send a second, and at once: a flood of them is answered 429. */
const HEALTH_PROBES_PER_S = 20;
const HEALTH_PROBES_BURST = 40;

/** The admission of the public health probes: a token bucket per client address. */
function healthProbeAdmission(): (request: FastifyRequest, reply: FastifyReply) => Promise<boolean> {
  const probes = new RateLimiter({ perSecond: HEALTH_PROBES_PER_S, burst: HEALTH_PROBES_BURST });
  return async (request, reply) => {
    const decision = probes.take({ id: request.ip, tenant: 'health-probes', scopes: [] }, 1);
    if (decision.allowed) return true;
    for (const [name, value] of rateHeaders(decision)) void reply.header(name, value);
    await refuse(reply, request, 'RATE_LIMITED', `Too many health probes from ${request.ip}: at most ${HEALTH_PROBES_PER_S} a second`);
    return false;
  };
}

const NO_SOCKETS = { connections: () => 0, operations: () => 0, slowConsumerCloses: () => 0 };

/** Metric sources made after the metrics themselves (read at scrape time; null until made). */
interface LateSources {
  ws: { connections(): number; operations(): number; slowConsumerCloses(): number } | null;
  subscriptions: SubscriptionExecutor | null;
  fetchCache: FetchCacheReadings | null;
  streams: HttpStreams | null;
}

/** The gateway's Prometheus metrics (gateway/observability/metrics.ts), over this process's parts. */
function gatewayMetrics(runtime: SubgraphRuntime | null, turns: TurnGate, late: LateSources): GatewayMetrics {
  const ws = () => late.ws ?? NO_SOCKETS;
  return new GatewayMetrics({
    subscriptionResumes: () => late.subscriptions?.resumed ?? 0,
    httpStreams: () => ({ open: late.streams?.count ?? 0, slowConsumerCloses: late.streams?.slowConsumerCloses ?? 0 }),
    ws: { connections: () => ws().connections(), operations: () => ws().operations(), slowConsumerCloses: () => ws().slowConsumerCloses() },
    outboxLag: async () => (runtime ? runtime.events.lag() : null),
    relay: async () => (runtime?.relay ? runtime.relay.status() : null),
    pool: () => runtime?.db.poolStats() ?? null,
    readCache: () => runtime?.db.readCacheStats() ?? null,
    fetchCache: () => late.fetchCache ?? { stats: { hits: new Map(), misses: new Map() }, snapshot: () => ({ bytes: 0 }) },
    queued: () => turns.queued,
    subgraphsReady: async () =>
      Object.fromEntries(
        await Promise.all(
          [...(runtime?.instances ?? new Map<string, SubgraphInstance>())].map(async ([name, s]) => [name, await s.ready().catch(() => false)] as const),
        ),
      ),
  });
}

/**
 * Federated subscriptions: one shared upstream stream per distinct subscription, opened in process or on a
 * subgraph server (gateway/subscriptions/), with the closer of the upstream connections.
 */
function subscriptionExecutor(
  config: Config,
  parts: {
    remoteUrls: ReadonlyMap<string, string>;
    local: ReadonlyMap<string, SubgraphInstance>;
    signer: PrincipalSigner | null;
    trust: SubgraphTrust;
    supergraphSdl: string;
    federated: FederatedGateway;
    log: FastifyBaseLogger;
  },
): { subscriptions: SubscriptionExecutor; close: () => Promise<void> } {
  const { remoteUrls, signer, trust, log } = parts;
  const remote = remoteUpstream(remoteUrls, { signer, trust, keepAliveMs: config.WS_KEEPALIVE_MS, maxQueued: config.WS_MAX_QUEUED_EVENTS });
  const inProcess = inProcessUpstream(parts.local, (error) => log.error({ err: error }, 'subgraph fault'));
  const subscriptions = new SubscriptionExecutor({
    supergraphSdl: parts.supergraphSdl,
    services: () => Object.fromEntries([...parts.federated.dataSources.entries()]),
    openUpstream: (service, request, context, options) =>
      remoteUrls.has(service) ? remote.open(service, request, context, options) : inProcess(service, request, context, options),
    maxQueuedPerSubscriber: config.WS_MAX_QUEUED_EVENTS,
    resumeGraceMs: config.SUBSCRIPTION_RESUME_GRACE_MS,
    logger: log,
  });
  return { subscriptions, close: () => remote.close() };
}

/** The subgraphs that run in this process, on their database; null when every subgraph runs on its own. */
async function startLocalSubgraphs(
  config: Config,
  modules: readonly SubgraphModule[],
  clock: Clock,
  log: FastifyBaseLogger,
  database: Promise<Database> | undefined,
): Promise<SubgraphRuntime | null> {
  if (modules.length === 0) return null;
  return startSubgraphRuntime({
    config,
    clock,
    modules,
    ...(database ? { database } : {}),
    onError: (error) => log.warn({ err: error }, 'outbox read failed; retrying'),
    onRestore: (lost) => log.warn({ lost }, restoreMessage(lost)),
  });
}

/** The WebSocket limits and timers, from the configuration. */
function socketSettings(config: Config) {
  return {
    connectionInitTimeoutMs: config.WS_CONNECTION_INIT_TIMEOUT_MS,
    keepAliveMs: config.WS_KEEPALIVE_MS,
    maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
    maxPayloadBytes: config.BODY_LIMIT_BYTES,
    maxSubscriptions: config.WS_MAX_SUBSCRIPTIONS,
  };
}
