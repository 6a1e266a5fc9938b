import { Readable } from 'node:stream';
import { lingerOnRefusedBodies } from './linger.js';
import { ApolloGateway, type GraphQLDataSource } from '@apollo/gateway';
import { ApolloServer, type GraphQLRequest } from '@apollo/server';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { GraphQLError } from 'graphql';
import { systemClock, type Clock } from '../platform/clock.js';
import { ConfigError, type Config } from '../platform/config.js';
import type { ErrorCode } from '../platform/errors.js';
import type { Database } from '../platform/db.js';
import type { EventHub } from '../platform/event-hub.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../platform/runtime.js';
import { checkCustomScalars } from '../platform/scalars.js';
import type { SubgraphInstance, SubgraphModule } from '../platform/subgraph.js';
import { readCheckedInSupergraph } from '../schema/compose.js';
import { subgraphs as allSubgraphs } from '../subgraphs/registry.js';
import { acceptsGraphQLResponse } from './accept.js';
import { createAuthenticator } from './auth.js';
import { boundedVariableErrorsPlugin, skipRepeatedVariableValidation } from './bounded-errors.js';
import { hasScope, isOperator, PrincipalSigner, type Principal } from '../platform/principal.js';
import { auditPlugin, type AuditSink } from './audit.js';
import { BrowserOrigins, registerBrowserRules } from './cors.js';
import { RateLimiter, rateHeaders, rateLimitedError, rateLimitPlugin } from './rate-limit.js';
import { authorizationPlugin, authorizingGateway, createAuthorizer } from './authorization.js';
import { gatewayContextFrom, principalOf, type GatewayContext } from './context.js';
import { registerDashboard } from './dashboard.js';
import { formatGraphQLError, requestErrorStatusPlugin } from './graphql-errors.js';
import { restoreMessage, type EventRelay } from '../platform/event-relay.js';
import { READY_CHECK_TIMEOUT_MS, readyWithin } from './health.js';
import { answerClientError, frameworkProblem } from './http-errors.js';
import { InProcessDataSource, setCompiledSubgraphExecution } from './in-process-data-source.js';
import { createLimiter, requestLimitsOf } from './limits.js';
import { assertPortFree, listenFailure } from './port.js';
import { GRAPHQL_PATH, pathOf, problem, problemAt, sendProblem } from './problem.js';
import { RemoteDataSource } from './remote-data-source.js';
import { RouteTable } from './route-table.js';
import { TurnGate, turnGatePlugin } from './admission.js';
import { registerApiReference } from './api-reference.js';
import { collapsing } from './collapse.js';
import { FetchCache } from './fetch-cache.js';
import { GatewayMetrics, type MetricSources } from './metrics.js';
import { exposeRequestId, requestIdOf } from './request-id.js';
import { nameSpansByRoute, tracedServerFactory, tracingEnabled } from './tracing.js';
import { buildOpenApiDocument, PACKAGE_VERSION } from './openapi.js';
import { registerRestRoutes, type OperationExecutor } from './rest-engine.js';
import { deferAccepting, schemaWithDefer } from './defer.js';
import { acceptsIncremental, formatPayload, MULTIPART_DEFER, multipartBody, type IncrementalSlot } from './incremental.js';
import { installCompiledExecution } from './plan-executor.js';
import { SubscriptionExecutor } from './subscriptions/executor.js';
import { inProcessUpstream } from './subscriptions/in-process-upstream.js';
import { remoteUpstream } from './subscriptions/remote-upstream.js';
import { attachGraphQLWebSocket } from './subscriptions/ws-server.js';

/** The longest a rate-limited request waits for its 429. */
const REFUSAL_PAUSE_MS = 1000;

export interface ServerOptions {
  config: Config;
  /** Source of "now" for every time rule. @default the system clock */
  clock?: Clock;
  /** The subgraphs to serve. @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
  /** Where the audit trail of state changes goes (gateway/audit.ts). @default the server log, as `audit` lines */
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
  close(): Promise<void>;
}

/**
 * Starts the supergraph: the gateway with GraphQL over HTTP and WebSocket, REST and health, and every
 * subgraph not named in SUBGRAPH_URLS in the same process (all of them by default).
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const modules = options.subgraphs ?? allSubgraphs;
  const remoteUrls = new Map(Object.entries(config.SUBGRAPH_URLS));
  const unknown = [...remoteUrls.keys()].filter((name) => !modules.some((m) => m.name === name));
  if (unknown.length > 0) {
    throw new ConfigError([`SUBGRAPH_URLS: no subgraph named ${unknown.join(', ')} (known: ${modules.map((m) => m.name).join(', ')})`]);
  }
  if (remoteUrls.size > 0 && !config.PRINCIPAL_SECRET && (config.API_KEYS_FILE || config.AUTH_JWKS_URL)) {
    throw new ConfigError([
      'PRINCIPAL_SECRET: needed with SUBGRAPH_URLS when API_KEYS_FILE or AUTH_JWKS_URL is set, so that subgraph servers can check whom a request acts for',
    ]);
  }
  const local = modules.filter((m) => !remoteUrls.has(m.name));
  const httpOptions = {
    headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    connectionsCheckingInterval: Math.min(1000, Math.ceil(config.HTTP_HEADERS_TIMEOUT_MS / 4)),
  };
  const app = Fastify({
    logger: { level: config.LOG_LEVEL },
    // One id per request, the caller's X-Request-Id when acceptable (gateway/request-id.ts).
    genReqId: requestIdOf,
    requestIdHeader: false,
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A request whose headers or body stall is answered 408 and closed (answerClientError). Node checks
    // its timers every connectionsCheckingInterval, so that interval bounds how late the 408 comes.
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    http: httpOptions,
    // With tracing on, each request runs inside its server span (gateway/tracing.ts).
    ...(tracingEnabled() ? { serverFactory: tracedServerFactory(httpOptions) } : {}),
    // Router errors (a malformed URL, an over-long path segment) and requests Node cannot parse are
    // problem details too.
    frameworkErrors: (error, request, reply) => void sendProblem(reply, frameworkProblem(error, request)),
    clientErrorHandler: answerClientError,
    // HEAD is declared per route (REST GETs, /health); Apollo's /graphql does not serve it.
    exposeHeadRoutes: false,
  });
  // A body refused unread (413) is answered and the connection closed without a reset (gateway/linger.ts).
  lingerOnRefusedBodies(app);
  const routes = new RouteTable(app);
  // A busy port is reported before the slow part of the start (database, migrations, gateway).
  await assertPortFree(config.HOST, config.PORT);
  const runtime: SubgraphRuntime | null =
    local.length > 0
      ? await startSubgraphRuntime({
          config,
          clock,
          modules: local,
          onError: (error) => app.log.warn({ err: error }, 'outbox read failed; retrying'),
          onRestore: (lost) => app.log.warn({ lost }, restoreMessage(lost)),
        })
      : null;
  const byName: ReadonlyMap<string, SubgraphInstance> = runtime?.instances ?? new Map();
  const gatewayKey = config.API_KEYS[0];
  // The caller's principal travels to subgraph servers signed with the secret they share.
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);

  // Bodies are JSON: without a text/plain parser, any other media type is 415 (as docs/operations.md documents).
  app.removeContentTypeParser('text/plain');
  // An empty body sent with Content-Type: application/json (common for POSTs that carry nothing, such as
  // completing a booking) is no body, not a parse error; everything else is fastify's own JSON parsing,
  // prototype-poisoning keys refused. Parsing a body, like starting an operation, waits for a turn of the
  // event loop of its own (gateway/admission.ts).
  const turns = new TurnGate();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') {
      done(null, undefined);
      return;
    }
    void turns.enter().then(() => parseJson(request, text, done));
  });
  const auth = createAuthenticator(config);
  exposeRequestId(app);
  if (tracingEnabled()) nameSpansByRoute(app);
  // Subgraph answers that are functions of the request alone, over all subgraphs (gateway/fetch-cache.ts).
  const fetchCache = new FetchCache({ maxBytes: config.GATEWAY_FETCH_CACHE_MB * 1024 * 1024, maxAgeMs: config.GATEWAY_FETCH_CACHE_MAX_AGE_S * 1000 });
  // Sources are read at scrape time; the WebSocket server is attached further down.
  let wsStats: MetricSources['ws'] = { connections: () => 0, operations: () => 0, slowConsumerCloses: () => 0 };
  let subscriptionResumes = () => 0;
  const metrics = new GatewayMetrics({
    subscriptionResumes: () => subscriptionResumes(),
    ws: { connections: () => wsStats.connections(), operations: () => wsStats.operations(), slowConsumerCloses: () => wsStats.slowConsumerCloses() },
    outboxLag: async () => (runtime ? runtime.events.lag() : null),
    relay: async () => (runtime?.relay ? runtime.relay.status() : null),
    pool: () => runtime?.db.poolStats() ?? null,
    readCache: () => runtime?.db.readCacheStats() ?? null,
    fetchCache: () => fetchCache,
    queued: () => turns.queued,
    subgraphsReady: async () => Object.fromEntries(await Promise.all([...byName].map(async ([name, s]) => [name, await s.ready().catch(() => false)] as const))),
  });
  metrics.instrument(app);

  // @apollo/gateway otherwise exports usage metrics to Apollo and probes cloud metadata endpoints at
  // start; the supergraph sends nothing off the machine unless an operator opts in (docs/operations.md, "Telemetry").
  process.env['APOLLO_TELEMETRY_DISABLED'] ??= 'true';
  // Who may use which field is declared in the supergraph (gateway/authorization.ts); the planners get it
  // without those SECURITY features, which they do not support.
  const composed = readCheckedInSupergraph();
  const authorizer = createAuthorizer(composed);
  const rateLimiter = new RateLimiter({ perSecond: config.RATE_LIMIT_PER_S, burst: config.RATE_LIMIT_BURST });
  const supergraphSdl = authorizer.plannerSdl;
  const dataSources = new Map<string, GraphQLDataSource>();
  const closeRemoteSources = async () => {
    for (const source of dataSources.values()) if (source instanceof RemoteDataSource) await source.close();
  };
  installCompiledExecution(config.GATEWAY_COMPILED_EXECUTION);
  setCompiledSubgraphExecution(config.SUBGRAPH_COMPILED_EXECUTION);
  const gateway = new ApolloGateway({
    supergraphSdl,
    buildService: ({ name }) => {
      const url = remoteUrls.get(name);
      const instance = byName.get(name);
      let source: GraphQLDataSource;
      if (url) {
        source = new RemoteDataSource(name, url, {
          timeoutMs: config.SUBGRAPH_TIMEOUT_MS,
          apiKey: gatewayKey,
          signer,
          onFailure: (error) => app.log.warn({ subgraph: name, reason: String(error) }, 'subgraph unavailable'),
        });
      } else if (instance) {
        source = new InProcessDataSource(name, instance, (error) => app.log.error({ err: error, subgraph: name }, 'subgraph fault'));
      } else {
        throw new Error(`subgraph ${name} is in the supergraph but neither running here nor in SUBGRAPH_URLS`);
      }
      dataSources.set(name, source);
      // Timed as made; identical reads in flight collapsed before that (gateway/collapse.ts); answers that
      // are functions of the request alone kept before that (gateway/fetch-cache.ts).
      const measured = metrics.measured(name, source);
      const collapsed = config.GATEWAY_COLLAPSE_FETCHES ? collapsing(measured, metrics.collapsedFetch(name)) : measured;
      return fetchCache.wrap(name, modules.find((m) => m.name === name)?.pure, collapsed);
    },
    logger: app.log,
    // Deferred fragments are planned as fetches of their own (gateway/plan-executor.ts runs them).
    queryPlannerConfig: { incrementalDelivery: { enableDefer: true } },
  });

  gateway.onSchemaLoadOrUpdate(({ apiSchema }) => checkCustomScalars(apiSchema));
  skipRepeatedVariableValidation(gateway);
  const apollo = new ApolloServer<GatewayContext>({
    gateway: deferAccepting(authorizingGateway(gateway, authorizer)),
    includeStacktraceInErrorResponses: false,
    // Explicit, so NODE_ENV does not change the API: frontend teams and their tools read the schema.
    introspection: true,
    // The limits hook has already parsed every document within this bound; this keeps Apollo's own parse
    // bounded for any path that reaches it another way.
    parseOptions: { maxTokens: config.GRAPHQL_MAX_TOKENS },
    // Operations are sent as text; a persisted-query hash is answered PERSISTED_QUERY_NOT_SUPPORTED.
    persistedQueries: false,
    // No landing page: Apollo's loads scripts and fonts from its CDN, and nothing leaves the machine, so a
    // browser asking /graphql for text/html gets 406 like any other client that accepts no GraphQL type.
    plugins: [
      fastifyApolloDrainPlugin(app),
      ApolloServerPluginLandingPageDisabled(),
      requestErrorStatusPlugin(),
      boundedVariableErrorsPlugin(),
      turnGatePlugin(turns),
      authorizationPlugin(authorizer),
      rateLimitPlugin(rateLimiter),
      auditPlugin(options.audit ?? ((entry) => app.log.info({ audit: entry }, 'audit'))),
    ],
    formatError: (formatted, error) => formatGraphQLError(formatted, error, app.log),
  });
  await apollo.start();

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const body = frameworkProblem(error, request);
    if (body.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, body);
  });
  app.setNotFoundHandler(routes.notFound);

  // One credential check for GraphQL over HTTP and every REST path; routes declared public (the JWKS,
  // /health) stay open.
  // Every credential resolves to a principal (gateway/auth.ts); the request acts for it from here on.
  // Browsers first: CORS preflights carry no credential, and a cross-site state change is refused before
  // anything else is looked at (gateway/cors.ts).
  const browserOrigins = new BrowserOrigins(config.CORS_ORIGINS);
  registerBrowserRules(app, browserOrigins);
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = auth.publicPrincipal;
      return;
    }
    const result = await auth.authenticate(request.headers as Record<string, string | undefined>);
    if ('principal' in result) {
      request.principal = result.principal;
      // A route that declares a scope (/metrics) is refused before anything else without it.
      const requires = request.routeOptions.config.requires;
      if (requires && !hasScope(result.principal, requires)) {
        return refuse(reply, request.url, 'FORBIDDEN', `Principal ${result.principal.id} may not use ${pathOf(request.url)}: it needs ${requires} (or ops:admin)`);
      }
      // The first token, before the body is read (gateway/rate-limit.ts).
      const decision = rateLimiter.take(result.principal, 1);
      for (const [name, value] of rateHeaders(decision)) void reply.header(name, value);
      if (decision.allowed) return;
      // Answered after a pause (its Retry-After, at most a second): a client that ignores Retry-After
      // cannot turn refusals into load; the pause is a timer, not work.
      await new Promise((resolve) => setTimeout(resolve, Math.min(REFUSAL_PAUSE_MS, decision.retryAfter * 1000)));
      await sendProblem(reply, problemAt(request.url, problem('RATE_LIMITED', rateLimitedError(result.principal, decision).message, { instance: request.url })));
      return reply;
    }
    return refuse(reply, request.url, 'UNAUTHENTICATED', `Missing or invalid credential (${result.refused}): send x-api-key or Authorization: Bearer`);
  });

  // Bodies are read as sent: a compressed body would be parsed as if it were plain JSON.
  app.addHook('onRequest', async (request, reply) => {
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding === undefined || encoding === '' || encoding === 'identity') return;
    return refuse(reply, request.url, 'UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${encoding} is not supported: send the body uncompressed`);
  });

  // /graphql answers JSON only: an Accept header that allows neither GraphQL type (a browser's
  // text/html) is 406 before anything else is looked at.
  app.addHook('onRequest', async (request, reply) => {
    if (pathOf(request.url) !== GRAPHQL_PATH || acceptsGraphQLResponse(request.headers.accept)) return;
    return refuse(reply, request.url, 'NOT_ACCEPTABLE', 'Accept must allow application/graphql-response+json or application/json: /graphql serves no browser page');
  });

  // Request limits before Apollo validates or plans anything (gateway/limits.ts): a document over a limit
  // costs one bounded parse and one linear walk.
  const limiter = createLimiter(supergraphSdl, requestLimitsOf(config));
  app.addHook('preHandler', async (request, reply) => {
    if (pathOf(request.url) !== GRAPHQL_PATH) return;
    const params = graphQLParamsOf(request.method === 'GET' ? request.query : request.body);
    if (!params) return;
    const checked = limiter.check(params.query, params.variables, params.operationName);
    if ('document' in checked) return;
    await sendProblem(reply, problemAt(request.url, problem(checked.error.extensions['code'] as ErrorCode, checked.error.message, { instance: request.url })));
    return reply;
  });

  const incrementalSlots = new WeakMap<FastifyRequest, IncrementalSlot>();
  // Deferred payloads leave after Apollo Server has answered: their errors are formatted as its own are.
  const formatDeferredErrors = (errors: readonly GraphQLError[] | undefined) =>
    errors?.map((error) => formatGraphQLError({ ...error.toJSON() }, error, app.log));
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    // OPTIONS is answered for every path alike (204 with Allow), not by Apollo.
    method: ['GET', 'POST'],
    context: async (request) => {
      const context = gatewayContextFrom(request.headers, principalOf(request));
      context.incremental = { accepted: acceptsIncremental(request.headers.accept) };
      incrementalSlots.set(request, context.incremental);
      return context;
    },
  });
  // An answer with deferred parts still to come leaves as multipart/mixed: Apollo's (the initial payload,
  // every plugin applied) first, then each deferred part as it is ready, its errors formatted as Apollo's.
  app.addHook('onSend', async (request, reply, payload) => {
    const subsequent = incrementalSlots.get(request)?.subsequent;
    if (!subsequent || typeof payload !== 'string') return payload;
    reply.header('content-type', MULTIPART_DEFER);
    reply.removeHeader('content-length');
    return Readable.from(multipartBody(payload, subsequent, formatDeferredErrors));
  });

  const execute: OperationExecutor = async (operation, variables, contextValue) => {
    const request: GraphQLRequest = { query: operation, variables };
    const response = await apollo.executeOperation(request, { contextValue });
    if (response.body.kind !== 'single') throw new Error('REST operations must not stream');
    const { data, errors } = response.body.singleResult;
    return { data: data ?? null, ...(errors ? { errors } : {}) };
  };
  // Outside production every REST answer is checked against its documented schema (gateway/rest-engine.ts).
  const restOptions = {
    checkAnswers: process.env['NODE_ENV'] !== 'production',
    authorize: (operation: string, principal: Principal) => authorizer.checkOperation(operation, principal),
  };
  for (const module of modules) registerRestRoutes(app, module.restPrefix, module.routes, execute, restOptions);
  // The REST contract, generated from the same route tables and schemas, and a page that renders it.
  const openApi = buildOpenApiDocument(modules, {
    keysRequired: auth.enabled,
    version: PACKAGE_VERSION,
    scopesOf: (operation) => authorizer.scopesOf(operation),
  });
  app.get('/openapi.json', { config: { public: true }, exposeHeadRoute: true }, async (_request, reply) => reply.type('application/json').send(openApi));
  registerApiReference(app);
  // Prometheus metrics: for operators and monitoring credentials (`metrics:read`), not for partners.
  app.get('/metrics', { config: { requires: 'metrics:read' } }, async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));

  const inProcess = inProcessUpstream(byName, (error) => app.log.error({ err: error }, 'subgraph fault'));
  const remote = remoteUpstream(remoteUrls, { apiKey: gatewayKey, signer, keepAliveMs: config.WS_KEEPALIVE_MS, maxQueued: config.WS_MAX_QUEUED_EVENTS });
  const subscriptions = new SubscriptionExecutor({
    supergraphSdl,
    services: () => Object.fromEntries([...dataSources.entries()]),
    openUpstream: (service, request, context, options) =>
      remoteUrls.has(service) ? remote.open(service, request, context, options) : inProcess(service, request, context, options),
    maxQueuedPerSubscriber: config.WS_MAX_QUEUED_EVENTS,
    resumeGraceMs: config.SUBSCRIPTION_RESUME_GRACE_MS,
    logger: app.log,
  });
  subscriptionResumes = () => subscriptions.resumed;

  /** Whether a public route's request presents an operator's credential (a wrong one is simply not one). */
  const callerIsOperator = async (request: FastifyRequest) => {
    if (!auth.enabled) return isOperator(auth.publicPrincipal);
    if (request.headers['x-api-key'] === undefined && request.headers.authorization === undefined) return false;
    const result = await auth.authenticate(request.headers as Record<string, string | undefined>);
    return 'principal' in result && isOperator(result.principal);
  };
  const startedAt = Date.now();
  const uptime = () => Math.round((Date.now() - startedAt) / 1000);
  // Readiness: 503 whenever a subgraph cannot serve (its database does not answer, its server is down).
  // Public, so it names no address: a subgraph server's URL is shown to an operator's credential only.
  const health = async (request: FastifyRequest, reply: FastifyReply) => {
    const operator = await callerIsOperator(request);
    const checks = await Promise.all(
      modules.map(async ({ name }) => {
        const url = remoteUrls.get(name);
        const instance = byName.get(name);
        const ready = url ? await remoteReady(url, gatewayKey) : instance ? await readyWithin(() => instance.ready()) : false;
        return [name, url && operator ? { ready, url } : { ready }] as const;
      }),
    );
    const ready = checks.every(([, c]) => c.ready);
    const eventBus = runtime?.relay ? await eventBusHealth(runtime.relay) : null;
    // A foreign stream does not make the process unready (it serves, its events wait in the outbox), but
    // it is degraded: nothing reaches the bus until an operator acts.
    return reply.code(ready ? 200 : 503).send({
      status: ready && eventBus?.status !== 'degraded' ? 'ok' : 'degraded',
      ready,
      uptime_s: uptime(),
      database: runtime?.db.kind ?? null,
      subgraphs: Object.fromEntries(checks),
      websocket: { connections: ws.connections(), slow_consumer_closes: ws.slowConsumerCloses() },
      ...(eventBus ? { event_bus: eventBus } : {}),
    });
  };
  app.get('/health', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/ready', { config: { public: true }, exposeHeadRoute: true }, health);
  // Liveness: the process serves requests (a database outage is not a reason to restart it).
  app.get('/health/live', { config: { public: true }, exposeHeadRoute: true }, async () => ({ status: 'ok', uptime_s: uptime() }));
  // The operations dashboard at / (public files; its data comes over the GraphQL WebSocket, with a key when one is needed).
  registerDashboard(app);

  await app.ready();
  const ws = attachGraphQLWebSocket({
    server: app.server,
    path: '/graphql',
    schema: schemaWithDefer(subscriptions.schema),
    auth,
    subscriptions,
    execute: async (query, variables, operationName, gatewayContext) => {
      // A socket takes incremental payloads: deferred fragments come as `next` messages of their own.
      const slot: IncrementalSlot = { accepted: true };
      const contextValue = { ...gatewayContext, incremental: slot };
      const response = await apollo.executeOperation({ query, variables, ...(operationName ? { operationName } : {}) }, { contextValue });
      if (response.body.kind !== 'single') throw new Error('streamed responses are not served over WebSocket');
      const { data, errors } = response.body.singleResult;
      const initial = {
        ...(data !== undefined ? { data } : {}),
        ...(errors ? { errors: errors.map((e) => new GraphQLError(e.message, { ...(e.path ? { path: e.path } : {}), extensions: e.extensions ?? {} })) } : {}),
      };
      const subsequent = slot.subsequent;
      if (!subsequent) return initial;
      return (async function* () {
        yield { ...initial, hasNext: true };
        for await (const payload of subsequent) yield formatPayload(payload, formatDeferredErrors);
      })();
    },
    connectionInitTimeoutMs: config.WS_CONNECTION_INIT_TIMEOUT_MS,
    keepAliveMs: config.WS_KEEPALIVE_MS,
    maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
    maxPayloadBytes: config.BODY_LIMIT_BYTES,
    limiter,
    authorizer,
    browserOrigins,
    rateLimiter,
    maxSubscriptions: config.WS_MAX_SUBSCRIPTIONS,
  });

  wsStats = ws;

  let address: string;
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST });
  } catch (error) {
    await ws.close();
    await apollo.stop();
    await remote.close();
    await closeRemoteSources();
    await runtime?.close();
    throw listenFailure(error, config.HOST, config.PORT);
  }
  const url = address.replace('[::1]', '127.0.0.1');

  let closing: Promise<void> | undefined;
  return {
    app,
    db: runtime?.db ?? null,
    events: runtime?.events ?? null,
    relay: runtime?.relay ?? null,
    subscriptions,
    subgraphs: byName,
    url,
    close() {
      closing ??= (async () => {
        await ws.close();
        await app.close();
        await apollo.stop();
        await remote.close();
        await closeRemoteSources();
        await runtime?.close();
      })();
      return closing;
    },
  };
}

/** The event bus as /health reports it: the relay's connection and how far behind the outbox it is. */
async function eventBusHealth(relay: EventRelay) {
  const status = await relay.status().catch(() => null);
  if (!status) return { status: 'degraded', connected: false };
  return {
    status: status.lineage === 'foreign' ? 'degraded' : 'ok',
    connected: status.connected,
    leading: status.leading,
    relay_lag_events: status.lagEvents,
    relay_lag_seconds: Math.round(status.lagSeconds * 10) / 10,
    ...(status.lineageReason ? { reason: status.lineageReason } : {}),
  };
}

/** A subgraph server's readiness, from its /health (unreachable or slow: not ready). */
async function remoteReady(graphqlUrl: string, apiKey: string | undefined): Promise<boolean> {
  try {
    const res = await fetch(new URL('/health', graphqlUrl), {
      signal: AbortSignal.timeout(READY_CHECK_TIMEOUT_MS),
      ...(apiKey ? { headers: { 'x-api-key': apiKey } } : {}),
    });
    const body = (await res.json()) as { ready?: unknown };
    return res.ok && body.ready === true;
  } catch {
    return false;
  }
}

/**
 * The query, variables and operation name of a GraphQL-over-HTTP request (a JSON body, or GET parameters
 * whose variables are JSON text); null when they are not well-formed, which Apollo then answers.
 */
function graphQLParamsOf(raw: unknown): { query: string; variables: Record<string, unknown> | null; operationName: string | null } | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const { query, variables, operationName } = raw as Record<string, unknown>;
  if (typeof query !== 'string') return null;
  let vars: unknown = variables ?? null;
  if (typeof vars === 'string') {
    try {
      vars = JSON.parse(vars) as unknown;
    } catch {
      return null;
    }
  }
  if (vars !== null && (typeof vars !== 'object' || Array.isArray(vars))) return null;
  return { query, variables: vars as Record<string, unknown> | null, operationName: typeof operationName === 'string' ? operationName : null };
}

/** Answers a request from an `onRequest` hook with problem details (GraphQL-shaped on /graphql) and stops it. */
async function refuse(reply: FastifyReply, url: string, code: ErrorCode, detail: string): Promise<FastifyReply> {
  await sendProblem(reply, problemAt(url, problem(code, detail, { instance: url })));
  return reply;
}
