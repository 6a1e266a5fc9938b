import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal } from '../../platform/principal.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { Authorizer } from '../security/authorization.js';
import { registerApiReference } from './api-reference.js';
import { registerRestRoutes, type OperationExecutor } from './engine.js';
import { buildOpenApiDocument, PACKAGE_VERSION } from './openapi.js';

export interface RestOptions {
  modules: readonly SubgraphModule[];
  /** Runs a route's operation: the policies and executor of /graphql, without Apollo Server's pipeline (gateway/graphql/apollo.ts). */
  execute: OperationExecutor;
  authorizer: Authorizer;
}

/**
 * The `rest` part: the REST paths of every subgraph's route table, each a GraphQL operation run through
 * the same pipeline, execution, authorization and limits; the OpenAPI document generated from the same
 * tables and schemas (built by the warm-up), and a page that renders it.
 */
export const restPlugin = fp(
  async (app: FastifyInstance, options: RestOptions) => {
    const { openApiDocument } = registerRest(app, options, app.pipeline, app.auth.enabled);
    app.warmUp.add('openapi', openApiDocument);
  },
  { name: 'rest', fastify: '5.x', dependencies: ['warm-up', 'edge-guard', 'pipeline'] },
);

/** The routes, the OpenAPI document (built once, on its first request or by the warm-up) and its page. */
function registerRest(app: FastifyInstance, options: RestOptions, pipeline: Pipeline, keysRequired: boolean): { openApiDocument: () => unknown } {
  // Outside production every REST answer is checked against its documented schema (gateway/rest/engine.ts).
  const restOptions = {
    pipeline,
    checkAnswers: process.env['NODE_ENV'] !== 'production',
    authorize: (operation: string, principal: Principal) => options.authorizer.checkOperation(operation, principal),
  };
  for (const module of options.modules) registerRestRoutes(app, module.restPrefix, module.routes, options.execute, restOptions);
  // Built once, on its first request or by the warm-up after listening (gateway/http/warm-up.ts).
  let openApi: ReturnType<typeof buildOpenApiDocument> | null = null;
  const openApiDocument = () =>
    (openApi ??= buildOpenApiDocument(options.modules, {
      keysRequired,
      version: PACKAGE_VERSION,
      scopesOf: (operation) => options.authorizer.scopesOf(operation),
    }));
  app.get('/openapi.json', { config: { public: true }, exposeHeadRoute: true }, async (_request, reply) =>
    reply.type('application/json').send(openApiDocument()),
  );
  registerApiReference(app);
  return { openApiDocument };
}
