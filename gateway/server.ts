import { ApolloGateway, type GraphQLDataSource } from '@apollo/gateway';
import { ApolloServer, type GraphQLRequest } from '@apollo/server';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { GraphQLError } from 'graphql';
import { fileURLToPath } from 'node:url';
import { systemClock, type Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { openDatabase, type Database } from '../platform/db.js';
import { EventHub } from '../platform/event-hub.js';
import { migrate } from '../platform/migrate.js';
import type { SubgraphInstance, SubgraphModule } from '../platform/subgraph.js';
import { readCheckedInSupergraph } from '../schema/compose.js';
import { subgraphs as allSubgraphs } from '../subgraphs/registry.js';
import { createAuthenticator } from './auth.js';
import { gatewayContextFrom, type GatewayContext } from './context.js';
import { formatGraphQLError, requestErrorStatusPlugin } from './graphql-errors.js';
import { answerClientError, frameworkProblem } from './http-errors.js';
import { InProcessDataSource } from './in-process-data-source.js';
import { pathOf, problem, problemAt, sendProblem } from './problem.js';
import { registerRestRoutes, type OperationExecutor } from './rest-engine.js';
import { SubscriptionExecutor } from './subscriptions/executor.js';
import { inProcessUpstream } from './subscriptions/in-process-upstream.js';
import { attachGraphQLWebSocket } from './subscriptions/ws-server.js';

export interface ServerOptions {
  config: Config;
  /** Source of "now" for every time rule. @default the system clock */
  clock?: Clock;
  /** PostgreSQL schema to work in (tests give each server its own). */
  databaseSchema?: string;
  /** The subgraphs to serve. @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
}

export interface RunningServer {
  app: FastifyInstance;
  db: Database;
  events: EventHub;
  /** Federated subscriptions (shared upstream streams). */
  subscriptions: SubscriptionExecutor;
  /** The running subgraphs by name (tests reach `_entities` through their schemas). */
  subgraphs: ReadonlyMap<string, SubgraphInstance>;
  /** Base URL, e.g. http://127.0.0.1:4000 */
  url: string;
  close(): Promise<void>;
}

const platformMigrations = { owner: 'platform', dir: fileURLToPath(new URL('../platform/migrations/', import.meta.url)) };

/** Starts the whole supergraph in one process: database, subgraphs, gateway, GraphQL, REST, health. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const modules = options.subgraphs ?? allSubgraphs;
  const db = await openDatabase({
    url: config.DATABASE_URL,
    dataDir: config.DATA_DIR === ':memory:' ? undefined : config.DATA_DIR,
    schema: options.databaseSchema,
  });
  const started: { module: SubgraphModule; instance: SubgraphInstance }[] = [];
  const events = new EventHub(db);
  try {
    await migrate(db, [platformMigrations, ...modules.flatMap((m) => m.migrations)]);
    await events.start();
    for (const module of modules) started.push({ module, instance: await module.start({ db, config, clock, events }) });
  } catch (error) {
    for (const s of started) await s.instance.close();
    await events.close();
    await db.close();
    throw error;
  }

  const app = Fastify({
    logger: { level: config.LOG_LEVEL },
    bodyLimit: config.BODY_LIMIT_BYTES,
    // Router errors (a malformed URL, an over-long path segment) and requests Node cannot parse are
    // problem details too.
    frameworkErrors: (error, request, reply) => void sendProblem(reply, frameworkProblem(error, request)),
    clientErrorHandler: answerClientError,
  });
  // Bodies are JSON: without a text/plain parser, any other media type is 415 (as the README documents).
  app.removeContentTypeParser('text/plain');
  const auth = createAuthenticator(config.API_KEYS);
  const byName = new Map(started.map((s) => [s.module.name, s.instance]));

  const supergraphSdl = readCheckedInSupergraph();
  const dataSources = new Map<string, GraphQLDataSource>();
  const gateway = new ApolloGateway({
    supergraphSdl,
    buildService: ({ name }) => {
      const instance = byName.get(name);
      if (!instance) throw new Error(`subgraph ${name} is in the supergraph but not running`);
      const source = new InProcessDataSource(instance, (error) => app.log.error({ err: error, subgraph: name }, 'subgraph fault'));
      dataSources.set(name, source);
      return source;
    },
    logger: app.log,
  });

  const apollo = new ApolloServer<GatewayContext>({
    gateway,
    includeStacktraceInErrorResponses: false,
    // Operations are sent as text; a persisted-query hash is answered PERSISTED_QUERY_NOT_SUPPORTED.
    persistedQueries: false,
    plugins: [fastifyApolloDrainPlugin(app), requestErrorStatusPlugin()],
    formatError: (formatted, error) => formatGraphQLError(formatted, error, app.log),
  });
  await apollo.start();

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const body = frameworkProblem(error, request);
    if (body.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, body);
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, problem('NOT_FOUND', `No route for ${request.method} ${request.url.split('?')[0]}`, { instance: request.url })),
  );

  // One credential check for GraphQL over HTTP and every REST path; /health stays open for probes.
  app.addHook('onRequest', async (request, reply) => {
    if (!auth.enabled || pathOf(request.url) === '/health') return;
    if (auth.verify(request.headers as Record<string, string | undefined>)) return;
    const body = problem('UNAUTHENTICATED', 'Missing or invalid API key: send x-api-key or Authorization: Bearer', {
      instance: request.url,
    });
    await sendProblem(reply, problemAt(request.url, body));
    return reply;
  });

  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => gatewayContextFrom(request.headers),
  });

  const execute: OperationExecutor = async (operation, variables, contextValue) => {
    const request: GraphQLRequest = { query: operation, variables };
    const response = await apollo.executeOperation(request, { contextValue });
    if (response.body.kind !== 'single') throw new Error('REST operations must not stream');
    const { data, errors } = response.body.singleResult;
    return { data: data ?? null, ...(errors ? { errors } : {}) };
  };
  for (const { module, instance } of started) registerRestRoutes(app, module.restPrefix, instance.routes, execute);

  const subscriptions = new SubscriptionExecutor({
    supergraphSdl,
    services: () => Object.fromEntries([...dataSources.entries()]),
    openUpstream: inProcessUpstream(byName, (error) => app.log.error({ err: error }, 'subgraph fault')),
    maxQueuedPerSubscriber: config.WS_MAX_QUEUED_EVENTS,
    logger: app.log,
  });

  const startedAt = Date.now();
  app.get('/health', async () => {
    const checks = await Promise.all(
      started.map(async ({ module, instance }) => [module.name, { ready: await instance.ready().catch(() => false) }] as const),
    );
    const ready = checks.every(([, c]) => c.ready);
    return {
      status: ready ? 'ok' : 'degraded',
      ready,
      uptime_s: Math.round((Date.now() - startedAt) / 1000),
      database: db.kind,
      subgraphs: Object.fromEntries(checks),
    };
  });

  await app.ready();
  const ws = attachGraphQLWebSocket({
    server: app.server,
    path: '/graphql',
    schema: subscriptions.schema,
    auth,
    subscriptions,
    execute: async (query, variables, operationName, contextValue) => {
      const response = await apollo.executeOperation({ query, variables, ...(operationName ? { operationName } : {}) }, { contextValue });
      if (response.body.kind !== 'single') throw new Error('streamed responses are not served over WebSocket');
      const { data, errors } = response.body.singleResult;
      return {
        ...(data !== undefined ? { data } : {}),
        ...(errors ? { errors: errors.map((e) => new GraphQLError(e.message, { ...(e.path ? { path: e.path } : {}), extensions: e.extensions ?? {} })) } : {}),
      };
    },
    connectionInitTimeoutMs: config.WS_CONNECTION_INIT_TIMEOUT_MS,
    keepAliveMs: config.WS_KEEPALIVE_MS,
    maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
    maxPayloadBytes: config.BODY_LIMIT_BYTES,
  });

  let address: string;
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST });
  } catch (error) {
    await ws.close();
    await apollo.stop();
    for (const s of started) await s.instance.close();
    await events.close();
    await db.close();
    throw error;
  }
  const url = address.replace('[::1]', '127.0.0.1');

  let closing: Promise<void> | undefined;
  return {
    app,
    db,
    events,
    subscriptions,
    subgraphs: byName,
    url,
    close() {
      closing ??= (async () => {
        await ws.close();
        await app.close();
        await apollo.stop();
        for (const s of started) await s.instance.close();
        await events.close();
        await db.close();
      })();
      return closing;
    },
  };
}

