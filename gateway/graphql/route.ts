import { Readable } from 'node:stream';
import fastifyApollo from '@as-integrations/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { getOperationAST, OperationTypeNode } from 'graphql';
import { acceptsGraphQLResponse, graphQLAnswerType } from '../http/accept.js';
import { GRAPHQL_PATH, onGraphQLRoute, refuse } from '../http/problem.js';
import { sectionOf } from '../../platform/config.js';
import { STATE_POSITION_HEADER } from '../sources/state-route.js';
import { rateLimitedError, type RateLimiter } from '../security/rate-limit.js';
import type { ErrorCode } from '../../platform/errors.js';
import { hasScope, type Principal } from '../../platform/principal.js';
import { REST_CLIENT } from '../rest/engine.js';
import { graphqlConfig, type GraphQLConfig } from './config.js';
import { gatewayContextFrom, gatewayContextOfRequest, principalOf, type GatewayContext } from '../pipeline/context.js';
import type { Intake, Pipeline } from '../pipeline/pipeline.js';
import { acceptsIncremental, MULTIPART_DEFER, multipartBody, type IncrementalSlot } from '../planner/incremental.js';
import type { HttpStreams } from '../subscriptions/http-streams.js';
import type { GraphQLServer } from './apollo.js';
import type { CachePolicies, CachePolicy } from './cache-policy.js';
import type { DocumentParams } from './documents.js';
import { clientNameOf, graphQLParamsOf, isPlain, OperationRunner, refusedWith, requestCaller, withQuery, type RunAnswer } from './operation-runner.js';

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
  /** Runs one operation as a JSON POST of it runs: each entry of a batch. */
  runner: OperationRunner;
  /** The most operations one batch may hold; 0: batching is off. */
  maxBatch: number;
  /** Each batch entry beyond the first pays its door's token here. */
  rateLimiter: RateLimiter;
}

export interface GraphQLRoutePluginOptions {
  config: Pick<GraphQLConfig, 'GRAPHQL_MAX_BATCH'>;
}

/**
 * The `graphql-route` part: /graphql over HTTP, its streams served by the HTTP streams part; decorates the
 * app with the runner of single operations (`app.operations`) the doors that carry operations use.
 */
export const graphqlRoutePlugin = fp(
  async (app: FastifyInstance, options: GraphQLRoutePluginOptions) => {
    const config = sectionOf(graphqlConfig, options.config, 'graphql-route');
    const runner = new OperationRunner(app.pipeline, app.graphql);
    app.decorate('operations', runner);
    registerDocumentsRoute(app);
    await registerGraphQLRoute(app, app.graphql, {
      pipeline: app.pipeline,
      cachePolicies: app.supergraph.cachePolicies,
      streams: app.httpStreams,
      runner,
      maxBatch: config.GRAPHQL_MAX_BATCH,
      rateLimiter: app.rateLimiter,
    });
  },
  { name: 'graphql-route', fastify: '5.x', dependencies: ['graphql-server', 'http-streams', 'edge-guard', 'documents'] },
);

/** Where a caller lists the trusted documents it may run (the explorer offers them when a safelist is on). */
const DOCUMENTS_PATH = '/graphql/documents';

/**
 * `GET /graphql/documents`: the registered documents of the clients the caller may act as, and whether it
 * may send text of its own. Nothing runs; a caller sees only documents it could send anyway.
 */
function registerDocumentsRoute(app: FastifyInstance): void {
  app.get(DOCUMENTS_PATH, async (request, reply) => {
    const principal = principalOf(request);
    // REST routes' documents name GraphQL fields and types: listed only to those who may read the schema.
    const documents = app.documents
      .documentsFor(principal)
      .filter((d) => d.client !== REST_CLIENT || hasScope(principal, 'schema:read'))
      .map((d) => ({ client: d.client, id: d.id, name: d.name, type: d.type, text: d.body }));
    return reply.header('cache-control', 'private, no-store').send({ mode: app.documents.mode, freeText: app.documents.takesFreeText(principal), documents });
  });
}

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
 * A POST whose body Apollo Server would read without a word: JSON with plain parameters (`isPlain`).
 * Anything else goes to Apollo Server, which answers it as it always has.
 */
function isPlainPost(request: FastifyRequest, body: Record<string, unknown>): boolean {
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || type.split(';', 1)[0]!.trim().toLowerCase() !== 'application/json') return false;
  return isPlain(body);
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

function searchParamsOf(params: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(params)
      .filter(([, value]) => value !== undefined && value !== null)
      .map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)]),
  );
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

/**
 * A batch (Apollo's format: a JSON array of operations in one POST), answered as Apollo Router answers one:
 * a JSON array in the same order, 200, each entry the whole answer its operation would get alone (its
 * errors included); only what concerns the whole batch refuses it whole, before anything runs (not an
 * array of operations, empty, over GRAPHQL_MAX_BATCH as `BATCH_LIMIT_EXCEEDED` with 422, a subscription
 * or a deferred fragment, an Accept that takes no JSON). Every entry passes every step of the pipeline as a
 * request of its own would (gateway/graphql/operation-runner.ts): its document and limits here, first for
 * all entries, then validation, authorization, its own rate charge, audit and usage as it runs. Entries
 * run concurrently, as Apollo Server and Apollo Router run them.
 */
async function serveBatch(request: FastifyRequest, reply: FastifyReply, route: RouteState, entries: unknown[]): Promise<FastifyReply> {
  const refusal = batchRefusal(request, entries, route.maxBatch);
  if (refusal) return refuse(reply, request, refusal.code, refusal.detail);
  const contentType = graphQLAnswerType(request.headers.accept);
  if (!contentType)
    return refuse(reply, request, 'NOT_ACCEPTABLE', 'A batch is answered as JSON: Accept must allow application/graphql-response+json or application/json');
  const principal = principalOf(request);
  // Each entry pays one token at the door, as a request of its own would at the edge: the edge's token is
  // the first entry's; an entry the bucket cannot pay for is refused RATE_LIMITED and not even judged.
  const paid = entries.map((_, i) => (i === 0 ? { allowed: true as const, prepaid: request.prepaid } : doorToken(route.rateLimiter, principal)));
  request.prepaid = 0;
  const callers = paid.map((door) => requestCaller(request, door.allowed ? door.prepaid : 0));
  const judged = (entries as Record<string, unknown>[]).map((entry, i) => {
    const door = paid[i]!;
    return door.allowed ? route.runner.judge(entry, callers[i]!) : refusedWith(429, 'RATE_LIMITED', door.refusal);
  });
  const streamed = judged.findIndex((entry) => entry.ok && entry.streamed !== null);
  if (streamed !== -1) {
    const what = (judged[streamed] as { streamed: string }).streamed === 'subscription' ? 'a subscription' : 'a deferred fragment (@defer)';
    return refuse(reply, request, 'BAD_REQUEST', `Batch entry ${streamed} holds ${what}, which is streamed: send it in a request of its own; nothing was run`);
  }
  const settled = await Promise.allSettled(
    judged.map(async (entry, i): Promise<RunAnswer> =>
      entry.ok ? route.runner.run(entry, callers[i]!, contentType) : { status: entry.status, headers: new Map(), body: entry.body },
    ),
  );
  // One entry's failure is that entry's error: the others' answers (their writes) are not lost with it.
  const answers = settled.map((outcome, i): RunAnswer => {
    if (outcome.status === 'fulfilled') return outcome.value;
    request.log.error({ err: outcome.reason, entry: i }, 'a batch entry failed');
    return {
      status: 500,
      headers: new Map(),
      body: refusedWith(500, 'INTERNAL_SERVER_ERROR', 'Internal server error').body,
    };
  });
  // The newest log position any entry's writes reached: a later read sent with it sees every one of them.
  const positions = answers.map((a) => a.headers.get(STATE_POSITION_HEADER)).filter((p): p is string => p !== undefined);
  if (positions.length > 0)
    reply.header(
      STATE_POSITION_HEADER,
      positions.reduce((a, b) => (BigInt(a) >= BigInt(b) ? a : b)),
    );
  return reply
    .code(200)
    .header('cache-control', 'no-store')
    .type(contentType)
    .send(`[${answers.map((a) => a.body).join(',')}]`);
}

/** What refuses a batch whole before anything is judged or run, or null. */
function batchRefusal(request: FastifyRequest, entries: unknown[], maxBatch: number): { code: ErrorCode; detail: string } | null {
  if (maxBatch === 0) return { code: 'BAD_REQUEST', detail: 'Operation batching is off (GRAPHQL_MAX_BATCH=0): send one operation per request' };
  if (entries.length === 0) return { code: 'BAD_REQUEST', detail: 'A batch must hold at least one operation' };
  if (entries.length > maxBatch) {
    return {
      code: 'BATCH_LIMIT_EXCEEDED',
      detail: `Batch limits exceeded: the batch holds ${entries.length} operations, and at most ${maxBatch} are served in one (GRAPHQL_MAX_BATCH); nothing was run`,
    };
  }
  const notOperation = entries.findIndex((entry) => typeof entry !== 'object' || entry === null || Array.isArray(entry));
  if (notOperation !== -1) {
    return {
      code: 'BAD_REQUEST',
      detail: `Batch entry ${notOperation} is not an operation (an object with \`query\`, or a document's id or hash); nothing was run`,
    };
  }
  // An Idempotency-Key names one operation's effect: shared by several, the second would be refused as reused.
  if (entries.length > 1 && request.headers['idempotency-key'] !== undefined) {
    return {
      code: 'BAD_REQUEST',
      detail: 'Idempotency-Key names one operation: send a batch without it, or each operation that needs one in a request of its own; nothing was run',
    };
  }
  return null;
}

/** One token from the principal's bucket for a batch entry beyond the first. */
function doorToken(limiter: RateLimiter, principal: Principal): { allowed: true; prepaid: number } | { allowed: false; refusal: string } {
  const decision = limiter.take(principal, 1);
  if (!decision.allowed) return { allowed: false, refusal: rateLimitedError(principal, decision).message };
  return { allowed: true, prepaid: decision.unlimited ? 0 : 1 };
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
  if (!get && Array.isArray(request.body)) return serveBatch(request, reply, route, request.body as unknown[]);
  const raw = paramsOf(get ? request.query : request.body, get);
  // Not an object: Apollo Server answers 400, and nothing can run.
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

declare module 'fastify' {
  interface FastifyInstance {
    /** Runs one operation as a JSON POST of it runs (a batch's entries, the MCP endpoint's tools). */
    operations: OperationRunner;
  }
}
