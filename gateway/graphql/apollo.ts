import { ApolloServer } from '@apollo/server';
import {
  ApolloServerPluginLandingPageDisabled,
  ApolloServerPluginSchemaReportingDisabled,
  ApolloServerPluginUsageReportingDisabled,
} from '@apollo/server/plugin/disabled';
import type { FastifyInstance } from 'fastify';
import { loadGraphQLJit } from '../sources/in-process-data-source.js';
import fp from 'fastify-plugin';
import { GraphQLError, type GraphQLFormattedError, type GraphQLSchema } from 'graphql';
import type { GatewayContext } from '../pipeline/context.js';
import { deferAccepting } from '../planner/defer.js';
import { createDirectExecution, type DirectExecution, type ServedExecution } from '../pipeline/direct-execution.js';
import { formatGraphQLError } from '../pipeline/graphql-errors.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { formatPayload, type IncrementalSlot } from '../planner/incremental.js';
import { policyPlugin } from '../pipeline/operation-policy.js';
import { sectionOf } from '../../platform/config.js';
import { securityConfig, type SecurityConfig } from '../security/config.js';
import { graphqlConfig, type GraphQLConfig } from './config.js';
import { authorizingGateway, type Authorizer } from '../security/authorization.js';
import type { OperationExecutor } from '../rest/engine.js';
import type { SocketExecution } from '../subscriptions/ws-server.js';
import type { ApolloGateway } from '@apollo/gateway';

export interface GraphQLServerPluginOptions {
  config: SecurityConfig & GraphQLConfig;
}

/**
 * The `graphql-server` part: Apollo Server over the federated gateway (`app.graphql`), its executions
 * running the pipeline's policies; stopped when the app closes.
 */
export const graphqlServerPlugin = fp(
  async (app: FastifyInstance, options: GraphQLServerPluginOptions) => {
    const config = { ...sectionOf(securityConfig, options.config, 'graphql-server'), ...sectionOf(graphqlConfig, options.config, 'graphql-server') };
    const graphql = await startGraphQLServer({ app, config, gateway: app.federation.gateway, authorizer: app.supergraph.authorizer, pipeline: app.pipeline });
    app.addHook('onClose', () => graphql.apollo.stop());
    app.decorate('graphql', graphql);
    app.warmUp.add('graphql-jit', () => void loadGraphQLJit());
  },
  { name: 'graphql-server', fastify: '5.x', dependencies: ['warm-up', 'supergraph', 'pipeline'] },
);

interface GraphQLServerOptions {
  app: FastifyInstance;
  config: Pick<SecurityConfig, 'GRAPHQL_MAX_TOKENS'> & Pick<GraphQLConfig, 'GRAPHQL_DIRECT_EXECUTION'>;
  gateway: ApolloGateway;
  /** Runs a query without the fields its principal may not use (`authorizingGateway`). */
  authorizer: Authorizer;
  /** The operation pipeline (gateway/pipeline/pipeline.ts): its policies run in every execution here. */
  pipeline: Pipeline;
}

export interface GraphQLServer {
  apollo: ApolloServer<GatewayContext>;
  /**
   * Runs a REST route's operation (gateway/rest/engine.ts): the same policies, executor and error
   * formatting as /graphql, without Apollo Server's per-request pipeline (gateway/pipeline/direct-execution.ts).
   */
  execute: OperationExecutor;
  /**
   * Runs the queries and mutations GraphQL clients send as JSON over POST without Apollo Server's pipeline
   * (gateway/graphql/route.ts); null with GRAPHQL_DIRECT_EXECUTION=false.
   */
  direct: DirectExecution | null;
  /** Runs a query or mutation sent on a graphql-ws socket (gateway/subscriptions/ws-server.ts). */
  executeOnSocket: SocketExecution;
  /** Formats the errors of deferred payloads as Apollo Server formats its own. */
  formatDeferredErrors: (errors: readonly GraphQLError[] | undefined) => ReturnType<typeof formatGraphQLError>[] | undefined;
}

/**
 * Apollo Server over the federated gateway. Every execution here (Apollo Server's pipeline for GraphQL
 * over HTTP and on sockets, the direct execution of REST routes and of GraphQL over POST) runs the
 * operation pipeline's policies, in its order (gateway/pipeline/pipeline.ts): a turn of the event loop,
 * the request's refusals, bounded variable errors, then the intake guard, authorization by the
 * supergraph's declarations, the rate charge, the audit trail and field usage.
 */
async function startGraphQLServer(options: GraphQLServerOptions): Promise<GraphQLServer> {
  const { app } = options;
  const { policies } = options.pipeline;
  const formatError = (formatted: GraphQLFormattedError, error: unknown) => formatGraphQLError(formatted, error, app.log);
  // The schema and executor Apollo Server is given, kept for the direct execution of REST operations.
  let loaded: ServedExecution | null = null;
  let servedSchema: GraphQLSchema | null = null;
  const gateway = deferAccepting(authorizingGateway(options.gateway, options.authorizer));
  const apollo = new ApolloServer<GatewayContext>({
    gateway: {
      load: async (loadOptions) => {
        const gatewayLoaded = await gateway.load(loadOptions);
        if (gatewayLoaded.executor && servedSchema) loaded = { schema: servedSchema, executor: gatewayLoaded.executor };
        return gatewayLoaded;
      },
      onSchemaLoadOrUpdate: (callback) =>
        gateway.onSchemaLoadOrUpdate((context) => {
          servedSchema = context.apiSchema;
          if (loaded) loaded = { ...loaded, schema: context.apiSchema };
          callback(context);
        }),
      stop: () => gateway.stop(),
    },
    includeStacktraceInErrorResponses: false,
    // The app's close stops this server (onClose, once the server has drained its connections): on its own
    // at a signal, Apollo would stop while requests are still being answered.
    stopOnTerminationSignals: false,
    // Explicit, so NODE_ENV does not change the API: frontend teams and their tools read the schema.
    introspection: true,
    // The limits hook has already parsed every document within this bound; this keeps Apollo's own parse
    // bounded for any path that reaches it another way.
    parseOptions: { maxTokens: options.config.GRAPHQL_MAX_TOKENS },
    // Hashes and registered ids are resolved to text before Apollo sees a request (gateway/graphql/documents.ts).
    persistedQueries: false,
    // No landing page: Apollo's loads scripts and fonts from its CDN, and nothing leaves the machine, so a
    // browser asking /graphql for text/html gets 406 like any other client that accepts no GraphQL type.
    // For the same reason no usage or schema reports, whatever APOLLO_KEY says: GraphQL over POST runs
    // without Apollo's pipeline (gateway/pipeline/direct-execution.ts), and its answers are alike only
    // with Apollo's own plugins limited to those this server names (and its cache-control plugin).
    // No drain plugin: the app's close waits for its connections before its onClose hooks stop this server.
    plugins: [
      ApolloServerPluginLandingPageDisabled(),
      ApolloServerPluginUsageReportingDisabled(),
      ApolloServerPluginSchemaReportingDisabled(),
      policyPlugin(policies),
    ],
    formatError,
  });
  await apollo.start();
  const direct = createDirectExecution({
    policies,
    served: () => loaded,
    formatError,
    maxTokens: options.config.GRAPHQL_MAX_TOKENS,
    logger: app.log,
  });

  const formatDeferredErrors = (errors: readonly GraphQLError[] | undefined) =>
    errors?.map((error) => formatGraphQLError({ ...error.toJSON() }, error, app.log));

  const execute: OperationExecutor = async (operation, variables, contextValue) => {
    const { data, errors } = await direct.operation(operation, variables, contextValue);
    return { data: data ?? null, ...(errors ? { errors } : {}) };
  };

  const executeOnSocket: SocketExecution = async (query, variables, operationName, gatewayContext) => {
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
  };

  return { apollo, execute, direct: options.config.GRAPHQL_DIRECT_EXECUTION ? direct : null, executeOnSocket, formatDeferredErrors };
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Apollo Server over the federated gateway, and the executions that run without its pipeline. */
    graphql: GraphQLServer;
  }
}
