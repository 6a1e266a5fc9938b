import { GraphQLError, parse, type DocumentNode } from 'graphql';
import type { SubscribePayload } from 'graphql-ws';
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
import { ConfigError, isDemoMode, isLoopbackHost, type Config } from '../platform/config.js';
import { isDatabaseUnavailable } from '../platform/db-errors.js';
import { restoreMessage } from '../platform/event-relay.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../platform/runtime.js';
import { readSubgraphSdl, type SubgraphModule } from '../platform/subgraph.js';
import { createAuthenticator } from './auth.js';
import { createAuthorizer } from './authorization.js';
import { ANONYMOUS_PRINCIPAL, DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner, subscriptionBody, type Principal } from '../platform/principal.js';
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
/** Where the subgraph server keeps, on an operation's context, the principal it was made for. */
const CALLER = Symbol('caller');
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
  // Without a secret a subgraph server would act for whatever credential reaches it: with credentials
  // configured that is only safe where nothing but this machine can reach it.
  if (!isDemoMode(config) && !config.PRINCIPAL_SECRET && !isLoopbackHost(config.HOST)) {
    throw new ConfigError([
      `PRINCIPAL_SECRET: needed for a subgraph server listening on ${config.HOST} while credentials are configured (API_KEYS, API_KEYS_FILE or AUTH_JWKS_URL); without it the server acts for any credential that reaches its port. Set PRINCIPAL_SECRET (the gateway's), or listen on loopback only (HOST=127.0.0.1)`,
    ]);
  }
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
    onRestore: (lost) => app.log.warn({ lost }, restoreMessage(lost)),
  });
  const instance = runtime.instances.get(module.name)!;
  for (const peer of module.peers ?? []) {
    if (!config.SUBGRAPH_URLS[peer]) {
      app.log.warn(`subgraph ${module.name} asks ${peer}, which SUBGRAPH_URLS does not name: it answers with its fallback (see docs/rental.md)`);
    }
  }
  const auth = createAuthenticator(config);
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  /** The principal an HTTP operation's context was made for (kept on it under a symbol: Apollo copies contexts). */
  const principalOfContext = (context: object) => (context as { [CALLER]?: Principal })[CALLER] ?? ANONYMOUS_PRINCIPAL;
  // The same requirements as the gateway's, read from this subgraph's own SDL and judged by the same code.
  const authorizer = createAuthorizer(readSubgraphSdl(module.name), { schema: instance.schema });
  const onInternalError = (error: unknown) => app.log.error({ err: error, subgraph: module.name }, 'subgraph fault');

  const apollo = new ApolloServer<SubgraphContext>({
    schema: instance.schema,
    includeStacktraceInErrorResponses: false,
    // Explicit, so NODE_ENV does not change the API: the schema is public to the gateway and to tools.
    introspection: true,
    // Federated tracing is for Apollo's managed platform; this gateway does not read it. No landing page
    // (Apollo's loads from its CDN): the subgraph answers GraphQL only, like the gateway.
    plugins: [
      fastifyApolloDrainPlugin(app),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginLandingPageDisabled(),
      // Every operation is judged again here, whole: a field its principal may not use refuses it.
      {
        async requestDidStart() {
          return {
            async didResolveOperation({ document, operationName, contextValue, request }) {
              const refused = authorizer.refusal(document, operationName, principalOfContext(contextValue), request.variables);
              if (refused) throw refused;
            },
          };
        },
      },
    ],
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

  // The principal. With PRINCIPAL_SECRET, only what the gateway signed for this very call (this subgraph,
  // this method, path and body, within 30 s): anything else is 401, `_service`, `_entities` and introspection
  // included. Without one (a loopback-only server, checked at start), the request's own credential.
  app.decorateRequest('principal', null);
  app.decorateRequest('rawBody', '');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    request.rawBody = text;
    parseJson(request, text, done);
  });
  const unsigned = (reply: FastifyReply, url: string) =>
    sendProblem(reply, problem('UNAUTHENTICATED', `Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only calls its gateway signed for it`, { instance: url }));
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = auth.publicPrincipal;
      return;
    }
    if (signer) {
      // Checked against the body once it is read (preHandler); a call without a signature stops here.
      if (typeof request.headers[PRINCIPAL_HEADER] === 'string') return;
      await unsigned(reply, request.url);
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
  app.addHook('preHandler', async (request, reply) => {
    if (!signer || request.principal) return;
    const call = { subgraph: module.name, method: request.method, path: request.url, body: request.rawBody };
    const signed = signer.verify(request.headers[PRINCIPAL_HEADER] as string | undefined, call);
    if (signed) {
      request.principal = signed;
      return;
    }
    await unsigned(reply, request.url);
    return reply;
  });
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => {
      const principal = principalOf(request);
      const context = instance.context({ headers: gatewayContextFrom(request.headers, principal).headers, principal }) as SubgraphContext;
      return Object.assign(context, { [CALLER]: principal });
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
  /** Whom an operation on a socket acts for: what the gateway signed into it, or (no secret) the connection's credential. */
  const operationPrincipal = (ctx: object, payload: SubscribePayload): Principal | null => {
    if (!signer) return connections.get(ctx) ?? null;
    const header = payload.extensions?.[PRINCIPAL_HEADER];
    const call = { subgraph: module.name, method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody(payload) };
    return signer.verify(typeof header === 'string' ? header : undefined, call);
  };
  const operations = new WeakMap<SubscribePayload, Principal>();
  const wss = new WebSocketServer({ server: app.server, path: '/graphql', maxPayload: config.BODY_LIMIT_BYTES });
  const disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
    {
      schema: instance.schema,
      connectionInitWaitTimeout: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      onConnect: async (ctx) => {
        // With a secret every operation carries its own signed principal: the connection needs none.
        if (signer) return true;
        const result = await auth.authenticate(credentialHeadersOf(ctx.connectionParams));
        if ('principal' in result) {
          connections.set(ctx, result.principal);
          return true;
        }
        ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized');
        return false;
      },
      // An operation acts for the principal the gateway signed into it (with a secret), else for the
      // connection's; it is judged by this subgraph's own SDL before it runs.
      onSubscribe: (ctx, _id, payload) => {
        const principal = operationPrincipal(ctx, payload);
        if (!principal) {
          return [new GraphQLError(`Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only operations its gateway signed for it`, { extensions: { code: 'UNAUTHENTICATED' } })];
        }
        operations.set(payload, principal);
        let document: DocumentNode;
        try {
          document = parse(payload.query);
        } catch (error) {
          return [error instanceof GraphQLError ? error : new GraphQLError(String(error))];
        }
        const refused = authorizer.refusal(document, payload.operationName, principal, payload.variables);
        if (refused) return [refused];
        return;
      },
      // One context per operation: subscription resolvers renew its time and loaders per event.
      context: (ctx, _id, payload) => {
        const principal = operations.get(payload) ?? operationPrincipal(ctx, payload) ?? DEMO_PRINCIPAL;
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

declare module 'fastify' {
  interface FastifyRequest {
    /** A subgraph server's JSON body as received: the text the gateway's signature covers. */
    rawBody: string;
  }
}
