import type { FastifyInstance } from 'fastify';
import type { Principal } from '../../platform/principal.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import type { Pipeline } from '../execution/pipeline.js';
import type { Authorizer } from '../security/authorization.js';
import { registerApiReference } from './api-reference.js';
import { registerRestRoutes, type OperationExecutor } from './engine.js';
import { buildOpenApiDocument, PACKAGE_VERSION } from './openapi.js';

export interface RestOptions {
  modules: readonly SubgraphModule[];
  /** Runs a route's operation: the policies and executor of /graphql, without Apollo Server's pipeline (gateway/graphql/apollo.ts). */
  execute: OperationExecutor;
  authorizer: Authorizer;
  /** The operation pipeline every route's operation passes (gateway/execution/pipeline.ts). */
  pipeline: Pipeline;
  /** Whether credentials are configured (the OpenAPI document then declares the key). */
  keysRequired: boolean;
}

/**
 * The REST paths of every subgraph's route table, each a GraphQL operation run through the same execution,
 * authorization and limits; the OpenAPI document generated from the same tables and schemas, and a page
 * that renders it.
 */
export function registerRest(app: FastifyInstance, options: RestOptions): { openApiDocument: () => unknown } {
  // Outside production every REST answer is checked against its documented schema (gateway/rest/engine.ts).
  const restOptions = {
    pipeline: options.pipeline,
    checkAnswers: process.env['NODE_ENV'] !== 'production',
    authorize: (operation: string, principal: Principal) => options.authorizer.checkOperation(operation, principal),
  };
  for (const module of options.modules) registerRestRoutes(app, module.restPrefix, module.routes, options.execute, restOptions);
  // Built once, on its first request or by the warm-up after listening (gateway/http/warm-up.ts).
  let openApi: ReturnType<typeof buildOpenApiDocument> | null = null;
  const openApiDocument = () =>
    (openApi ??= buildOpenApiDocument(options.modules, {
      keysRequired: options.keysRequired,
      version: PACKAGE_VERSION,
      scopesOf: (operation) => options.authorizer.scopesOf(operation),
    }));
  app.get('/openapi.json', { config: { public: true }, exposeHeadRoute: true }, async (_request, reply) =>
    reply.type('application/json').send(openApiDocument()),
  );
  registerApiReference(app);
  return { openApiDocument };
}
