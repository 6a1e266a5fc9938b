import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import fastifyApollo from '@as-integrations/fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isDatabaseUnavailable } from '../../platform/db-errors.js';
import { ANONYMOUS_PRINCIPAL } from '../../platform/principal.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import { gatewayContextFrom, principalOf, type GatewayContext } from '../pipeline/context.js';
import { setCompiledSubgraphExecution } from '../sources/in-process-data-source.js';
import { answerPolicies, resolvePolicies, type ResolvedOperation } from '../pipeline/operation-policy.js';
import type { Intake, Pipeline } from '../pipeline/pipeline.js';
import { databaseUnavailable } from '../sources/subgraph-errors.js';
import { onGraphQLRoute, refuse } from '../http/problem.js';
import { compiledSubgraphGateway } from './compiled-executor.js';

/**
 * The subgraph's own request context, opaque here (each subgraph defines its type). The brand gives it a
 * required member, which is how Apollo's Fastify integration tells a custom context from its default.
 */
type SubgraphContext = Record<string, unknown> & { readonly [subgraphContext]: true };
/** Where the subgraph server keeps, on an operation's context, the principal it was made for. */
const CALLER = Symbol('caller');
declare const subgraphContext: unique symbol;

export interface SubgraphGraphQLOptions {
  instance: SubgraphInstance;
  /** The subgraph's SDL (its `@requiresScopes` and cost declarations are the pipeline's). */
  sdl: string;
  /** SUBGRAPH_COMPILED_EXECUTION: operations run compiled by graphql-jit. */
  compiled: boolean;
  onInternalError: (error: unknown) => void;
}

/**
 * The `subgraph-graphql` part: the subgraph's GraphQL over HTTP at /graphql, for its gateway's planned
 * fetches: each operation taken in by the pipeline's intake (the limits) on the route, then run by Apollo
 * Server through the pipeline's checks; stopped when the app closes.
 */
export const subgraphGraphQLPlugin = fp(
  async (app: FastifyInstance, options: SubgraphGraphQLOptions) => {
    const { instance, pipeline } = { ...options, pipeline: app.pipeline };
    setCompiledSubgraphExecution(options.compiled);
    const apollo = subgraphApollo(instance, options.sdl, pipeline, options.onInternalError);
    await apollo.start();
    app.addHook('onClose', () => apollo.stop());
    const intakes = new WeakMap<FastifyRequest, Intake>();
    app.addHook('preHandler', intakeHook(pipeline, intakes));
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
  },
  { name: 'subgraph-graphql', fastify: '5.x', dependencies: ['pipeline', 'signed-caller'] },
);

/** The pipeline's intake (the limits) on the GraphQL route, known by fastify's match, once the caller is. */
function intakeHook(pipeline: Pipeline, intakes: WeakMap<FastifyRequest, Intake>) {
  return async (request: FastifyRequest, reply: import('fastify').FastifyReply) => {
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
  };
}

/**
 * Apollo Server over the subgraph's schema: every operation passes the subgraph's pipeline checks (the
 * intake guard, authorization by the subgraph's own SDL, the audit line), run as the gateway runs them.
 */
function subgraphApollo(instance: SubgraphInstance, sdl: string, pipeline: Pipeline, onInternalError: (error: unknown) => void): ApolloServer<SubgraphContext> {
  /** The caller an HTTP operation's context was made for (kept on it under a symbol: Apollo copies contexts). */
  const callerOf = (context: object): GatewayContext =>
    (context as { [CALLER]?: GatewayContext })[CALLER] ?? { headers: {}, principal: ANONYMOUS_PRINCIPAL, client: NO_CLIENT };
  return new ApolloServer<SubgraphContext>({
    // The subgraph's schema, its operations run compiled (./compiled-executor.ts).
    gateway: compiledSubgraphGateway(instance.schema, sdl),
    includeStacktraceInErrorResponses: false,
    // The app's close stops this server (onClose, once the server has drained its connections): on its own
    // at a signal, Apollo would stop while requests are still being answered.
    stopOnTerminationSignals: false,
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
    // No drain plugin: the app's close waits for its connections before its onClose hooks stop this server.
    plugins: [
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
