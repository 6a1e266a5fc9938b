import { GraphQLError } from 'graphql';
import { lingerOnRefusedBodies } from './linger.js';
import { ApolloServer } from '@apollo/server';
import { exposeRequestId, requestIdOf } from './request-id.js';
import { nameSpansByRoute, tracedServerFactory, tracingEnabled } from './tracing.js';
import { ApolloServerPluginInlineTraceDisabled, ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { FormattedExecutionResult } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { systemClock, type Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { isDatabaseUnavailable } from '../platform/db-errors.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../platform/runtime.js';
import type { SubgraphModule } from '../platform/subgraph.js';
import { createAuthenticator } from './auth.js';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner, type Principal } from '../platform/principal.js';
import { gatewayContextFrom, principalOf } from './context.js';
import { readyWithin } from './health.js';
import { assertPortFree, listenFailure } from './port.js';
import { problem, sendProblem } from './problem.js';
import { RouteTable } from './route-table.js';
import { CloseCode } from './subscriptions/close-codes.js';
import { credentialHeadersOf } from './subscriptions/ws-server.js';
import { databaseUnavailable, serializeSubgraphError } from './subgraph-errors.js';

/**
 * The subgraph's own request context, opaque here (each subgraph defines its type). The brand gives it a
 * required member, which is how Apollo's Fastify integration tells a custom context from its default.
 */
type SubgraphContext = Record<string, unknown> & { readonly [subgraphContext]: true };
declare const subgraphContext: unique symbol;

export interface RunningSubgraphServer {
  app: FastifyInstance;
  runtime: SubgraphRuntime;
  /** GraphQL endpoint for SUBGRAPH_URLS, e.g. http://127.0.0.1:4101/graphql */
  graphqlUrl: string;
  close(): Promise<void>;
}

/**
 * One subgraph as its own server (distributed mode): GraphQL over HTTP and graphql-transport-ws at
 * /graphql for the gateway, and /health. It migrates and owns its tables as in the one-process mode;
 * with API_KEYS set it wants a key as the gateway does (the gateway sends its own).
 */
export async function startSubgraphServer(options: { config: Config; module: SubgraphModule; clock?: Clock }): Promise<RunningSubgraphServer> {
  const { config, module } = options;
  // The gateway forwards its request id: the subgraph's log lines carry the same one.
  const app = Fastify({
    logger: { level: config.LOG_LEVEL },
    bodyLimit: config.BODY_LIMIT_BYTES,
    genReqId: requestIdOf,
    requestIdHeader: false,
    // With tracing on, each request runs inside its server span, a child of the gateway's fetch.
    ...(tracingEnabled() ? { serverFactory: tracedServerFactory({}) } : {}),
  });
  // A body refused unread (413) is answered and the connection closed without a reset (gateway/linger.ts).
  lingerOnRefusedBodies(app);
  exposeRequestId(app);
  if (tracingEnabled()) nameSpansByRoute(app);
  const routes = new RouteTable(app);
  app.setNotFoundHandler(routes.notFound);
  await assertPortFree(config.HOST, config.PORT);
  const runtime = await startSubgraphRuntime({
    config,
    clock: options.clock ?? systemClock,
    modules: [module],
    onError: (error) => app.log.warn({ err: error }, 'outbox read failed; retrying'),
  });
  const instance = runtime.instances.get(module.name)!;
  for (const peer of module.peers ?? []) {
    if (!config.SUBGRAPH_URLS[peer]) {
      app.log.warn(`subgraph ${module.name} asks ${peer}, which SUBGRAPH_URLS does not name: it answers with its fallback (see docs/rental.md)`);
    }
  }
  const auth = createAuthenticator(config);
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  const onInternalError = (error: unknown) => app.log.error({ err: error, subgraph: module.name }, 'subgraph fault');

  const apollo = new ApolloServer<SubgraphContext>({
    schema: instance.schema,
    includeStacktraceInErrorResponses: false,
    // Explicit, so NODE_ENV does not change the API: the schema is public to the gateway and to tools.
    introspection: true,
    // Federated tracing is for Apollo's managed platform; this gateway does not read it. No landing page
    // (Apollo's loads from its CDN): the subgraph answers GraphQL only, like the gateway.
    plugins: [fastifyApolloDrainPlugin(app), ApolloServerPluginInlineTraceDisabled(), ApolloServerPluginLandingPageDisabled()],
    formatError: (formatted, error) => {
      if (isDatabaseUnavailable(error)) return databaseUnavailable(formatted);
      if (formatted.extensions?.['code'] !== 'INTERNAL_SERVER_ERROR') return formatted;
      onInternalError(error);
      return { message: 'Internal server error', ...(formatted.path ? { path: formatted.path } : {}), extensions: { code: 'INTERNAL_SERVER_ERROR' } };
    },
  });
  try {
    await apollo.start();
  } catch (error) {
    await runtime.close();
    throw error;
  }

  // The principal: the one the gateway signed for this request, or else the request's own credential. A
  // principal header that does not verify (forged, expired, made for another request) is refused.
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = auth.publicPrincipal;
      return;
    }
    const header = request.headers[PRINCIPAL_HEADER];
    if (header !== undefined) {
      const signed = signer?.verify(typeof header === 'string' ? header : undefined, request.id);
      if (signed) {
        request.principal = signed;
        return;
      }
      await sendProblem(reply, problem('UNAUTHENTICATED', `Invalid ${PRINCIPAL_HEADER}: not signed by this deployment's gateway for this request`, { instance: request.url }));
      return reply;
    }
    const result = await auth.authenticate(request.headers as Record<string, string | undefined>);
    if ('principal' in result) {
      request.principal = result.principal;
      return;
    }
    await sendProblem(reply, problem('UNAUTHENTICATED', `Missing or invalid credential (${result.refused})`, { instance: request.url }));
    return reply;
  });
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => {
      const principal = principalOf(request);
      return instance.context({ headers: gatewayContextFrom(request.headers, principal).headers, principal }) as SubgraphContext;
    },
  });
  const health = async (_request: unknown, reply: FastifyReply) => {
    const ready = await readyWithin(() => instance.ready());
    return reply.status(ready ? 200 : 503).send({ subgraph: module.name, ready, database: runtime.db.kind });
  };
  app.get('/health', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/ready', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/live', { config: { public: true }, exposeHeadRoute: true }, async () => ({ subgraph: module.name, status: 'ok' }));

  await app.ready();
  const connections = new WeakMap<object, Principal>();
  const subscriptionPrincipal = (ctx: object, extensions: Record<string, unknown> | null | undefined): Principal | null => {
    const header = extensions?.[PRINCIPAL_HEADER];
    if (header === undefined) return connections.get(ctx) ?? null;
    const requestId = extensions?.['requestId'];
    return signer?.verify(typeof header === 'string' ? header : undefined, typeof requestId === 'string' ? requestId : undefined) ?? null;
  };
  const wss = new WebSocketServer({ server: app.server, path: '/graphql', maxPayload: config.BODY_LIMIT_BYTES });
  const disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
    {
      schema: instance.schema,
      connectionInitWaitTimeout: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      onConnect: async (ctx) => {
        const result = await auth.authenticate(credentialHeadersOf(ctx.connectionParams));
        if ('principal' in result) {
          connections.set(ctx, result.principal);
          return true;
        }
        ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized');
        return false;
      },
      // A subscription acts for the principal the gateway signed into it, else for the connection's.
      onSubscribe: (ctx, _id, payload) => {
        if (payload.extensions?.[PRINCIPAL_HEADER] === undefined || subscriptionPrincipal(ctx, payload.extensions)) return;
        return [new GraphQLError(`Invalid ${PRINCIPAL_HEADER}: not signed by this deployment's gateway for this request`, { extensions: { code: 'UNAUTHENTICATED' } })];
      },
      // One context per operation: subscription resolvers renew its time and loaders per event.
      context: (ctx, _id, payload) => {
        const principal = subscriptionPrincipal(ctx, payload.extensions) ?? connections.get(ctx) ?? DEMO_PRINCIPAL;
        return instance.context({ headers: gatewayContextFrom(ctx.extra.request.headers, principal).headers, principal }) as Record<string, unknown>;
      },
      onNext: (_ctx, _id, _payload, _args, result): FormattedExecutionResult | void => {
        if (!result.errors) return;
        return { ...result, errors: result.errors.map((e) => serializeSubgraphError(e, onInternalError)) } as FormattedExecutionResult;
      },
    },
    wss,
    config.WS_KEEPALIVE_MS,
  );

  let address: string;
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST });
  } catch (error) {
    await disposer.dispose();
    await apollo.stop();
    await runtime.close();
    throw listenFailure(error, config.HOST, config.PORT);
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    runtime,
    graphqlUrl: `${address.replace('[::1]', '127.0.0.1')}/graphql`,
    close() {
      closing ??= (async () => {
        await disposer.dispose();
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        await app.close();
        await apollo.stop();
        await runtime.close();
      })();
      return closing;
    },
  };
}
