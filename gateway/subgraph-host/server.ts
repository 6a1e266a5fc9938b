import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../../platform/clock.js';
import { ConfigError, isDemoMode, isLoopbackHost, type PlatformConfig } from '../../platform/config.js';
import type { ExecutionConfig } from '../execution/config.js';
import { setCompiledSubgraphExecution } from '../execution/in-process-data-source.js';
import type { HttpConfig } from '../http/config.js';
import type { SubscriptionsConfig } from '../subscriptions/config.js';
import { isDatabaseUnavailable } from '../../platform/db-errors.js';
import { restoreMessage } from '../../platform/lineage.js';
import { ANONYMOUS_PRINCIPAL, PrincipalSigner, type Principal } from '../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../platform/runtime.js';
import { readSubgraphSdl, type SubgraphInstance, type SubgraphModule } from '../../platform/subgraph.js';
import { gatewayContextFrom, principalOf } from '../execution/context.js';
import { databaseUnavailable } from '../execution/subgraph-errors.js';
import { createHttpApp, listenOrClose } from '../http/app.js';
import { WarmUp } from '../http/warm-up.js';
import { assertPortFree } from '../http/port.js';
import { registerSubgraphHealth } from '../observability/health.js';
import { createAuthenticator } from '../security/auth.js';
import { createAuthorizer, type Authorizer } from '../security/authorization.js';
import { registerSignedCaller } from './caller.js';
import { compiledSubgraphGateway } from './compiled-executor.js';
import { attachSubgraphSocket } from './socket.js';

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
/** What a subgraph server reads: platform's section, the HTTP and WebSocket settings and how subgraphs execute; the subgraph its own slice of the rest. */
export type SubgraphServerConfig = PlatformConfig &
  HttpConfig &
  SubscriptionsConfig &
  Pick<ExecutionConfig, 'SUBGRAPH_COMPILED_EXECUTION'> &
  Readonly<Record<string, unknown>>;

export async function startSubgraphServer(options: { config: SubgraphServerConfig; module: SubgraphModule; clock?: Clock }): Promise<RunningSubgraphServer> {
  const { config, module } = options;
  // Without a secret a subgraph server would act for whatever credential reaches it: with credentials
  // configured that is only safe where nothing but this machine can reach it.
  if (!isDemoMode(config) && !config.PRINCIPAL_SECRET && !isLoopbackHost(config.HOST)) {
    throw new ConfigError([
      `PRINCIPAL_SECRET: needed for a subgraph server listening on ${config.HOST} while credentials are configured (API_KEYS, API_KEYS_FILE or AUTH_JWKS_URL); without it the server acts for any credential that reaches its port. Set PRINCIPAL_SECRET (the gateway's), or listen on loopback only (HOST=127.0.0.1)`,
    ]);
  }
  const http = createHttpApp(config);
  const { app, routes, closers } = http;
  await assertPortFree(config.HOST, config.PORT);
  const runtime = await startSubgraphRuntime({
    config,
    clock: options.clock ?? systemClock,
    modules: [module],
    onError: (error) => app.log.warn({ err: error }, 'outbox read failed; retrying'),
    onRestore: (lost) => app.log.warn({ lost }, restoreMessage(lost)),
  });
  closers.add(() => runtime.close());
  const instance = runtime.instances.get(module.name)!;
  for (const peer of module.peers ?? []) {
    if (!config.SUBGRAPH_URLS[peer]) {
      app.log.warn(`subgraph ${module.name} asks ${peer}, which SUBGRAPH_URLS does not name: it answers with its fallback (see docs/rental.md)`);
    }
  }
  const auth = createAuthenticator(config);
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  // The same requirements as the gateway's, read from this subgraph's own SDL and judged by the same code.
  const sdl = readSubgraphSdl(module.name);
  const authorizer = createAuthorizer(sdl, { schema: instance.schema });
  const onInternalError = (error: unknown) => app.log.error({ err: error, subgraph: module.name }, 'subgraph fault');

  setCompiledSubgraphExecution(config.SUBGRAPH_COMPILED_EXECUTION);
  const apollo = subgraphApollo(app, instance, sdl, authorizer, onInternalError);
  try {
    await apollo.start();
  } catch (error) {
    await closers.close();
    throw error;
  }
  closers.add(() => apollo.stop());

  registerSignedCaller(app, { subgraph: module.name, routes, auth, signer });
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => {
      const principal = principalOf(request);
      const context = instance.context({ headers: gatewayContextFrom(request.headers, principal).headers, principal }) as SubgraphContext;
      return Object.assign(context, { [CALLER]: principal });
    },
  });
  registerSubgraphHealth(app, module.name, instance, runtime.db.kind);

  await app.ready();
  const socket = attachSubgraphSocket(app.server, { config, subgraph: module.name, instance, auth, signer, authorizer, onInternalError });
  closers.add(() => app.close());
  closers.add(() => socket.close());
  const url = await listenOrClose(http, config);
  // What changes no answer is built after listening, as the gateway's warm-up does (gateway/http/warm-up.ts).
  const warmUp = new WarmUp();
  if (instance.warmUp) warmUp.add(`subgraph ${module.name}`, () => instance.warmUp!());
  warmUp.start((name, error) => app.log.warn({ err: error, task: name }, 'warm-up task failed; it is made on first use'));
  return { app, runtime, graphqlUrl: `${url}/graphql`, close: () => closers.close() };
}

/** Apollo Server over the subgraph's schema: every operation judged again here, by the subgraph's own SDL. */
function subgraphApollo(
  app: FastifyInstance,
  instance: SubgraphInstance,
  sdl: string,
  authorizer: Authorizer,
  onInternalError: (error: unknown) => void,
): ApolloServer<SubgraphContext> {
  /** The principal an HTTP operation's context was made for (kept on it under a symbol: Apollo copies contexts). */
  const principalOfContext = (context: object) => (context as { [CALLER]?: Principal })[CALLER] ?? ANONYMOUS_PRINCIPAL;
  return new ApolloServer<SubgraphContext>({
    // The subgraph's schema, its operations run compiled (./compiled-executor.ts).
    gateway: compiledSubgraphGateway(instance.schema, sdl),
    includeStacktraceInErrorResponses: false,
    // Explicit, so NODE_ENV does not change the API: the schema is public to the gateway and to tools.
    introspection: true,
    // Federated tracing is for Apollo's managed platform; this gateway does not read it. No landing page
    // (Apollo's loads from its CDN): the subgraph answers GraphQL only, like the gateway.
    // No cache hints per field either: Apollo's cache-control plugin would wrap every resolver of the schema
    // to time each field's hint (graphql-jit then calls a wrapper for every field, leaf or not), so that this
    // answer's Cache-Control could restrict the gateway's. What the gateway lets be kept is decided there,
    // from the composed `@cacheControl` hints, for registered queries sent by GET (gateway/graphql/cache-policy.ts);
    // every other answer is `no-store`, in distributed mode as in one process.
    plugins: [
      fastifyApolloDrainPlugin(app),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginLandingPageDisabled(),
      ApolloServerPluginCacheControlDisabled(),
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
}
