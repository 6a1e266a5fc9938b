import { Readable } from 'node:stream';
import fastifyApollo from '@as-integrations/fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../../platform/errors.js';
import { acceptsGraphQLResponse } from '../http/accept.js';
import { GRAPHQL_PATH, pathOf, refuse } from '../http/problem.js';
import { gatewayContextFrom, principalOf } from '../execution/context.js';
import { acceptsIncremental, MULTIPART_DEFER, multipartBody, type IncrementalSlot } from '../execution/incremental.js';
import type { Limiter } from '../security/limits.js';
import type { GraphQLServer } from './apollo.js';

/**
 * GraphQL over HTTP at /graphql (GET and POST): JSON answers only, every document checked against the
 * request limits before Apollo validates or plans it, and answers with deferred parts sent as
 * multipart/mixed.
 */
export async function registerGraphQLRoute(app: FastifyInstance, server: GraphQLServer, limiter: Limiter): Promise<void> {
  // An Accept header that allows neither GraphQL type (a browser's text/html) is 406 before anything else
  // is looked at: /graphql serves no page.
  app.addHook('onRequest', async (request, reply) => {
    if (pathOf(request.url) !== GRAPHQL_PATH || acceptsGraphQLResponse(request.headers.accept)) return;
    return refuse(
      reply,
      request.url,
      'NOT_ACCEPTABLE',
      'Accept must allow application/graphql-response+json or application/json: /graphql serves no browser page',
    );
  });

  // Request limits before Apollo validates or plans anything (gateway/security/limits.ts): a document over a
  // limit costs one bounded parse and one linear walk.
  app.addHook('preHandler', async (request, reply) => {
    if (pathOf(request.url) !== GRAPHQL_PATH) return;
    const params = graphQLParamsOf(request.method === 'GET' ? request.query : request.body);
    if (!params) return;
    const checked = limiter.check(params.query, params.variables, params.operationName);
    if ('document' in checked) return;
    return refuse(reply, request.url, checked.error.extensions['code'] as ErrorCode, checked.error.message);
  });

  const incrementalSlots = new WeakMap<FastifyRequest, IncrementalSlot>();
  await app.register(fastifyApollo(server.apollo), {
    path: GRAPHQL_PATH,
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
    return Readable.from(multipartBody(payload, subsequent, server.formatDeferredErrors));
  });
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
