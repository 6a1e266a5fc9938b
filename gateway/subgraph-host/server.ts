import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { systemClock, type Clock } from '../../platform/clock.js';
import { ConfigError, type PlatformConfig } from '../../platform/config.js';
import type { ExecutionConfig } from '../execution/config.js';
import { setCompiledSubgraphExecution } from '../execution/in-process-data-source.js';
import type { HttpConfig } from '../http/config.js';
import type { SubscriptionsConfig } from '../subscriptions/config.js';
import { isDatabaseUnavailable } from '../../platform/db-errors.js';
import { restoreMessage } from '../../platform/lineage.js';
import { ANONYMOUS_PRINCIPAL, PrincipalSigner } from '../../platform/principal.js';
import { startSubgraphRuntime, type SubgraphRuntime } from '../../platform/runtime.js';
import { readSubgraphSdl, type SubgraphInstance, type SubgraphModule } from '../../platform/subgraph.js';
import { gatewayContextFrom, principalOf, type GatewayContext } from '../execution/context.js';
import { answerPolicies, resolvePolicies, type ResolvedOperation } from '../execution/operation-policy.js';
import { createPipeline, graphqlValidation, type Intake, type Pipeline } from '../execution/pipeline.js';
import { onGraphQLRoute, refuse } from '../http/problem.js';
import { auditPolicy } from '../security/audit.js';
import { createLimiter, requestLimitsOf, subgraphLimitsOf, type RequestLimitsConfig } from '../security/limits.js';
import { databaseUnavailable } from '../execution/subgraph-errors.js';
import { createHttpApp, listenOrClose } from '../http/app.js';
import { WarmUp } from '../http/warm-up.js';
import { assertPortFree } from '../http/port.js';
import { registerSubgraphHealth } from '../observability/health.js';
import { createAuthorizer, wholeAuthorizationPolicy } from '../security/authorization.js';
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

/** What a subgraph server reads: platform's section, the HTTP and WebSocket settings and how subgraphs execute; the subgraph its own slice of the rest. */
export type SubgraphServerConfig = PlatformConfig &
  HttpConfig &
  SubscriptionsConfig &
  Pick<ExecutionConfig, 'SUBGRAPH_COMPILED_EXECUTION'> &
  RequestLimitsConfig &
  Readonly<Record<string, unknown>>;

/**
 * One subgraph as its own server (distributed mode): GraphQL over HTTP and graphql-transport-ws at
 * /graphql for its gateway, and /health. It migrates and owns its tables as in the one-process mode, and
 * serves only calls its gateway signed with PRINCIPAL_SECRET, which it needs to start.
 */
export async function startSubgraphServer(options: { config: SubgraphServerConfig; module: SubgraphModule; clock?: Clock }): Promise<RunningSubgraphServer> {
  const { config, module } = options;
  // A subgraph server serves only what its gateway signed: without the secret it could check nothing, and
  // acting for whatever credential reaches its port is what a hostile caller would want.
  const signer = PrincipalSigner.from(config.PRINCIPAL_SECRET);
  if (!signer) {
    throw new ConfigError([
      `PRINCIPAL_SECRET: needed by a subgraph server, which serves only calls its gateway signed (set the gateway's PRINCIPAL_SECRET, 32+ characters, in both; e.g. PRINCIPAL_SECRET=$(openssl rand -base64 32))`,
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
  // The same requirements as the gateway's, read from this subgraph's own SDL and judged by the same code.
  const sdl = readSubgraphSdl(module.name);
  const authorizer = createAuthorizer(sdl, { schema: instance.schema });
  const onInternalError = (error: unknown) => app.log.error({ err: error, subgraph: module.name }, 'subgraph fault');

  // The operation pipeline (gateway/execution/pipeline.ts) with the steps that apply to its gateway's
  // signed calls, on both of its doors (HTTP and the socket); docs/operations.md says why each other step
  // is the gateway's alone.
  const pipeline = createPipeline(
    {
      documents: { notApplied: 'a subgraph server runs the fetches its gateway planned and signed; trusted documents are resolved at the gateway' },
      limits: createLimiter(sdl, subgraphLimitsOf(requestLimitsOf(config)), { schema: instance.schema }),
      validation: graphqlValidation(),
      authorization: wholeAuthorizationPolicy(authorizer),
      rate: { notApplied: "charged at the gateway, once per client operation, in the caller's bucket; a planned fetch is part of it" },
      audit: auditPolicy((entry) => app.log.info({ audit: { ...entry, subgraph: module.name } }, 'audit')),
      usage: { notApplied: 'counted at the gateway, by client and operation' },
    },
    [],
  );

  setCompiledSubgraphExecution(config.SUBGRAPH_COMPILED_EXECUTION);
  const apollo = subgraphApollo(app, instance, sdl, pipeline, onInternalError);
  try {
    await apollo.start();
  } catch (error) {
    await closers.close();
    throw error;
  }
  closers.add(() => apollo.stop());

  registerSignedCaller(app, { subgraph: module.name, routes, publicPrincipal: ANONYMOUS_PRINCIPAL, signer });
  // The pipeline's intake (the limits) on the GraphQL route, known by fastify's match, once the caller is.
  const intakes = new WeakMap<FastifyRequest, Intake>();
  app.addHook('preHandler', async (request, reply) => {
    if (!onGraphQLRoute(request)) return;
    const get = request.method === 'GET';
    const body = (get ? request.query : request.body) as Record<string, unknown> | null | undefined;
    // A subgraph server takes operations as text (its gateway's planned fetches): anything else runs nothing.
    if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof body['query'] !== 'string') {
      return refuse(reply, request, 'BAD_REQUEST', 'A subgraph server takes one operation as text: a JSON object (or GET parameters) with `query`');
    }
    const variables = variablesOf(body['variables']);
    const taken = pipeline.intake({
      params: { query: body['query'] },
      variables,
      operationName: typeof body['operationName'] === 'string' ? body['operationName'] : null,
      principal: principalOf(request),
      clientName: undefined,
    });
    if (!taken.ok) return refuse(reply, request, taken.code, taken.message);
    intakes.set(request, taken.intake);
    // Apollo Server reads a GET's URL with its own parser: it is given the parameters judged here.
    if (get) {
      const judged: Record<string, string> = { query: taken.intake.source };
      if (variables) judged['variables'] = JSON.stringify(variables);
      if (typeof body['operationName'] === 'string') judged['operationName'] = body['operationName'];
      request.raw.url = `/graphql?${new URLSearchParams(judged).toString()}`;
    }
  });
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => {
      const principal = principalOf(request);
      const headers = gatewayContextFrom(request.headers, principal).headers;
      const context = instance.context({ headers, principal }) as SubgraphContext;
      const intake = intakes.get(request);
      return Object.assign(context, { [CALLER]: { headers, principal, client: NO_CLIENT, ...(intake ? { intake } : {}) } satisfies GatewayContext });
    },
  });
  registerSubgraphHealth(app, module.name, instance, runtime.db.kind);

  await app.ready();
  const socket = attachSubgraphSocket(app.server, { config, subgraph: module.name, instance, signer, pipeline, onInternalError });
  closers.add(() => app.close());
  closers.add(() => socket.close());
  const url = await listenOrClose(http, config);
  // What changes no answer is built after listening, as the gateway's warm-up does (gateway/http/warm-up.ts).
  const warmUp = new WarmUp();
  if (instance.warmUp) warmUp.add(`subgraph ${module.name}`, () => instance.warmUp!());
  warmUp.start((name, error) => app.log.warn({ err: error, task: name }, 'warm-up task failed; it is made on first use'));
  return { app, runtime, graphqlUrl: `${url}/graphql`, close: () => closers.close() };
}

/**
 * Apollo Server over the subgraph's schema: every operation passes the subgraph's pipeline checks (the
 * intake guard, authorization by the subgraph's own SDL, the audit line), run as the gateway runs them.
 */
function subgraphApollo(
  app: FastifyInstance,
  instance: SubgraphInstance,
  sdl: string,
  pipeline: Pipeline,
  onInternalError: (error: unknown) => void,
): ApolloServer<SubgraphContext> {
  /** The caller an HTTP operation's context was made for (kept on it under a symbol: Apollo copies contexts). */
  const callerOf = (context: object): GatewayContext =>
    (context as { [CALLER]?: GatewayContext })[CALLER] ?? { headers: {}, principal: ANONYMOUS_PRINCIPAL, client: NO_CLIENT };
  return new ApolloServer<SubgraphContext>({
    // The subgraph's schema, its operations run compiled (./compiled-executor.ts).
    gateway: compiledSubgraphGateway(instance.schema, sdl),
    includeStacktraceInErrorResponses: false,
    // Its gateway sends text: a hash names nothing here.
    persistedQueries: false,
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
      // The pipeline's checks: the intake guard, authorization whole (a field its principal may not use
      // refuses it), and the audit line of every mutation field.
      {
        async requestDidStart() {
          let resolved: ResolvedOperation | undefined;
          return {
            async didResolveOperation(request) {
              resolved = {
                schema: request.schema,
                document: request.document,
                operation: request.operation,
                operationName: request.request.operationName,
                source: request.source,
                variables: request.request.variables,
                context: callerOf(request.contextValue),
              };
              resolvePolicies(pipeline.checks, resolved, request.response.http.headers);
            },
            async willSendResponse({ response }) {
              if (!resolved || response.body.kind !== 'single') return;
              const { data, errors } = response.body.singleResult;
              answerPolicies(
                pipeline.checks,
                { ...(data !== undefined ? { data } : {}), ...(errors ? { errors } : {}), headers: response.http.headers },
                resolved,
              );
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

const NO_CLIENT = { name: null, version: null };

/** A request's `variables` as Apollo Server reads them: an object, or JSON text of one (GET); null otherwise. */
function variablesOf(value: unknown): Record<string, unknown> | null {
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value) as unknown;
    } catch {
      return null;
    }
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
}
