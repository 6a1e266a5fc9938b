import { Readable } from 'node:stream';
import fastifyApollo from '@as-integrations/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { getOperationAST, OperationTypeNode } from 'graphql';
import { acceptsGraphQLResponse, graphQLAnswerType } from '../http/accept.js';
import { GRAPHQL_PATH, onGraphQLRoute, refuse } from '../http/problem.js';
import { gatewayContextFrom, gatewayContextOfRequest, principalOf, type GatewayContext } from '../pipeline/context.js';
import type { Intake, Pipeline } from '../pipeline/pipeline.js';
import { acceptsIncremental, MULTIPART_DEFER, multipartBody, type IncrementalSlot } from '../planner/incremental.js';
import type { HttpStreams } from '../subscriptions/http-streams.js';
import type { GraphQLServer } from './apollo.js';
import type { CachePolicies, CachePolicy } from './cache-policy.js';
import type { DocumentParams } from './documents.js';

/**
 * GraphQL over HTTP at /graphql (GET and POST): JSON answers, operations sent as text or named by a
 * persisted-query hash or a registered document's id, every document checked against the request limits
 * before Apollo validates or plans it, answers with deferred parts sent as multipart/mixed, and a
 * registered query sent by GET cacheable for as long as its fields' hints say.
 */
interface GraphQLRouteOptions {
  /** The operation pipeline (gateway/pipeline/pipeline.ts): document resolution and the limits run here. */
  pipeline: Pipeline;
  cachePolicies: CachePolicies;
  streams: HttpStreams;
}

/** The `graphql-route` part: /graphql over HTTP, its streams served by the HTTP streams part. */
export const graphqlRoutePlugin = fp(
  async (app: FastifyInstance) =>
    registerGraphQLRoute(app, app.graphql, { pipeline: app.pipeline, cachePolicies: app.supergraph.cachePolicies, streams: app.httpStreams }),
  { name: 'graphql-route', fastify: '5.x', dependencies: ['graphql-server', 'http-streams'] },
);

async function registerGraphQLRoute(app: FastifyInstance, server: GraphQLServer, options: GraphQLRouteOptions): Promise<void> {
  // An Accept header that allows neither GraphQL type (a browser's text/html) is 406 before anything else
  // is looked at: /graphql serves no page. The hooks know the route by fastify's match (any spelling of
  // the path the router takes for /graphql), never by reading the URL.
  app.addHook('onRequest', async (request, reply) => {
    if (!onGraphQLRoute(request) || acceptsGraphQLResponse(request.headers.accept) || options.streams.acceptsStream(request.headers.accept)) return;
    return refuse(reply, request, 'NOT_ACCEPTABLE', 'Accept must allow application/graphql-response+json or application/json: /graphql serves no browser page');
  });

  // What each request took in (its resolved text and parsed document), for the context it runs with.
  const intakes = new WeakMap<FastifyRequest, Intake>();
  // The context an operation runs with, on either path: the forwarded headers, the principal, what the
  // door took in and paid, and whether the caller takes incremental payloads.
  const contextOf = (request: FastifyRequest): GatewayContext => {
    const intake = intakes.get(request);
    // A request the preHandler did not take in runs nothing: the intake guard refuses it (fails closed).
    const context = intake ? gatewayContextOfRequest(request, intake) : gatewayContextFrom(request.headers, principalOf(request));
    context.incremental = { accepted: acceptsIncremental(request.headers.accept) };
    return context;
  };

  // The operation pipeline's first two steps (gateway/pipeline/pipeline.ts): what the request names
  // resolves to text (an APQ hash, a registered document's id, or text a safelist may refuse), then the
  // request limits, before Apollo validates or plans anything (a document over a limit costs one bounded
  // parse and one linear walk). Validation, authorization, the rate charge, audit and usage follow in the
  // execution that serves the request.
  const cacheable = new WeakMap<FastifyRequest, CachePolicy>();
  const route: RouteState = { ...options, server, intakes, cacheable, contextOf };
  app.addHook('preHandler', async (request, reply) => takeIn(request, reply, route));

  const incrementalSlots = new WeakMap<FastifyRequest, IncrementalSlot>();
  await app.register(fastifyApollo(server.apollo), {
    path: GRAPHQL_PATH,
    // OPTIONS is answered for every path alike (204 with Allow), not by Apollo.
    method: ['GET', 'POST'],
    context: async (request) => {
      const context = contextOf(request);
      incrementalSlots.set(request, context.incremental!);
      return context;
    },
  });
  // An answer with deferred parts still to come leaves as multipart/mixed: Apollo's (the initial payload,
  // every plugin applied) first, then each deferred part as it is ready, its errors formatted as Apollo's.
  app.addHook('onSend', async (request, reply, payload) => {
    const policy = cacheable.get(request);
    if (policy && reply.statusCode === 200 && typeof payload === 'string' && isWholeAnswer(payload)) {
      reply.header('cache-control', `${policy.scope === 'PUBLIC' ? 'public' : 'private'}, max-age=${policy.maxAge}`);
      // Answers differ by who asks: a cache keys them by the credential too.
      reply.header('vary', [reply.getHeader('vary'), 'authorization', 'x-api-key'].filter(Boolean).join(', '));
    }
    const subsequent = incrementalSlots.get(request)?.subsequent;
    if (!subsequent || typeof payload !== 'string') return payload;
    reply.header('content-type', MULTIPART_DEFER);
    reply.removeHeader('content-length');
    return Readable.from(multipartBody(payload, subsequent, server.formatDeferredErrors));
  });
}

/**
 * A POST whose body Apollo Server would read without a word: JSON, `variables` an object (or none),
 * `operationName` a string (or none), no `extensions` left once a persisted query's hash is resolved.
 * Anything else goes to Apollo Server, which answers it as it always has.
 */
function isPlainPost(request: FastifyRequest, body: Record<string, unknown>): boolean {
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || type.split(';', 1)[0]!.trim().toLowerCase() !== 'application/json') return false;
  const { variables, operationName, extensions } = body;
  if (variables != null && (typeof variables !== 'object' || Array.isArray(variables))) return false;
  if (operationName != null && typeof operationName !== 'string') return false;
  return extensions == null;
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

/** The request's GraphQL parameters as sent (GET: `variables` and `extensions` as JSON text), or why they cannot be read. */
function paramsOf(raw: unknown, get: boolean): { params: DocumentParams & Record<string, unknown> } | { error: string } | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const params = raw as Record<string, unknown>;
  // A POST body is read as it is; only a GET's `extensions` (JSON text) is parsed, into a copy.
  if (!get || typeof params['extensions'] !== 'string') return { params };
  try {
    return { params: { ...params, extensions: JSON.parse(params['extensions']) as unknown } };
  } catch {
    return { error: '`extensions` must be JSON text' };
  }
}

/** The parameters with the resolved text as `query`, and what named it removed (Apollo Server sees plain text). */
function withQuery(params: Record<string, unknown>, query: string): Record<string, unknown> {
  const { documentId: _documentId, doc_id: _docId, extensions, ...rest } = params;
  const others = typeof extensions === 'object' && extensions !== null ? Object.entries(extensions).filter(([key]) => key !== 'persistedQuery') : [];
  return { ...rest, query, ...(others.length > 0 ? { extensions: Object.fromEntries(others) } : {}) };
}

function searchParamsOf(params: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(params)
      .filter(([, value]) => value !== undefined && value !== null)
      .map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)]),
  );
}

function clientNameOf(header: string | string[] | undefined): string | undefined {
  const name = Array.isArray(header) ? header[0] : header;
  return name?.trim() || undefined;
}

/** An answer with data and no errors (only those may be kept by a cache). */
function isWholeAnswer(payload: string): boolean {
  try {
    const body = JSON.parse(payload) as { errors?: unknown; data?: unknown };
    return body.errors === undefined && body.data !== undefined && body.data !== null;
  } catch {
    return false;
  }
}

/** What the route's hooks share: the pipeline, the streams and cache policies, what each request took in. */
interface RouteState extends GraphQLRouteOptions {
  server: GraphQLServer;
  intakes: WeakMap<FastifyRequest, Intake>;
  cacheable: WeakMap<FastifyRequest, CachePolicy>;
  contextOf(request: FastifyRequest): GatewayContext;
}

/**
 * The operation pipeline's first two steps (gateway/pipeline/pipeline.ts): what the request names resolves
 * to text (an APQ hash, a registered document's id, or text a safelist may refuse), then the request
 * limits, before Apollo validates or plans anything (a document over a limit costs one bounded parse and
 * one linear walk). Validation, authorization, the rate charge, audit and usage follow in the execution
 * that serves the request.
 */
async function takeIn(request: FastifyRequest, reply: FastifyReply, route: RouteState): Promise<FastifyReply | undefined> {
  if (!onGraphQLRoute(request)) return;
  const get = request.method === 'GET';
  const raw = paramsOf(get ? request.query : request.body, get);
  // Not an object (or an array: batching is off): Apollo Server answers 400, and nothing can run.
  if (!raw) return;
  if ('error' in raw) return refuse(reply, request, 'BAD_REQUEST', raw.error);
  const sent = graphQLParamsOf({ ...raw.params, query: '' });
  // Variables that are not an object (or not JSON text over GET): Apollo Server answers 400 before it parses.
  if (!sent) return;
  const taken = route.pipeline.intake({
    params: raw.params,
    variables: sent.variables,
    operationName: sent.operationName,
    principal: principalOf(request),
    clientName: clientNameOf(request.headers['apollographql-client-name']),
  });
  if (!taken.ok) {
    // APQ's own answers are GraphQL errors with 200, as Apollo Server sends them and Apollo Client expects.
    if (taken.status !== 200) return refuse(reply, request, taken.code, taken.message);
    return reply
      .code(200)
      .header('cache-control', 'private, no-cache, must-revalidate')
      .type('application/json; charset=utf-8')
      .send({ errors: [{ message: taken.message, extensions: { code: taken.code } }] });
  }
  route.intakes.set(request, taken.intake);
  return serveTaken(request, reply, route, { intake: taken.intake, params: raw.params, sent, get });
}

/**
 * A request taken in, served: streamed (subscriptions, SSE), run by the direct execution (a plain JSON
 * POST), or handed on to Apollo Server as the parameters judged here.
 */
async function serveTaken(
  request: FastifyRequest,
  reply: FastifyReply,
  route: RouteState,
  taken: { intake: Intake; params: Record<string, unknown>; sent: NonNullable<ReturnType<typeof graphQLParamsOf>>; get: boolean },
): Promise<FastifyReply | undefined> {
  const { intake, sent, get } = taken;
  // A request that named its document by a hash or an id reaches Apollo Server as plain text. A GET reaches
  // it as the parameters judged here, written again: Apollo reads the URL with its own parser, which
  // decodes what fastify's leaves as sent (a malformed escape), so it never sees other text or variables.
  const resolved = intake.byId ? withQuery(taken.params, intake.source) : taken.params;
  if (get) {
    const judged = { ...resolved, query: intake.source, variables: sent.variables ?? undefined, operationName: sent.operationName ?? undefined };
    request.raw.url = `${GRAPHQL_PATH}?${new URLSearchParams(searchParamsOf(judged)).toString()}`;
  } else if (intake.byId) request.body = resolved;
  const params = { query: intake.source, variables: sent.variables, operationName: sent.operationName };
  // Subscriptions (and SSE's queries) over HTTP are streamed by gateway/subscriptions/http-streams.ts.
  const subscription = getOperationAST(intake.document, params.operationName)?.operation === OperationTypeNode.SUBSCRIPTION;
  const protocol = route.streams.protocolOf(request.headers.accept, subscription);
  if (protocol) return route.streams.serve(request, reply, protocol, route.contextOf(request), params);
  if (get && intake.byId) {
    const policy = route.cachePolicies.of(intake.document, params.operationName);
    if (policy.maxAge > 0) route.cacheable.set(request, policy);
  }
  // A query or mutation sent as JSON over POST runs without Apollo Server's pipeline, answered as Apollo
  // Server answers it (gateway/pipeline/direct-execution.ts); what that path does not take goes on to Apollo.
  const direct = route.server.direct;
  if (!direct || get || !isPlainPost(request, resolved)) return;
  const contentType = graphQLAnswerType(request.headers.accept);
  const accepted = contentType ? direct.accept(params.query, params.operationName) : null;
  if (!accepted || !contentType) return;
  const answer = await direct.http(accepted, params.variables, route.contextOf(request), contentType);
  reply.code(answer.status);
  for (const [name, value] of answer.headers) reply.header(name, value);
  return reply.send(answer.body);
}
