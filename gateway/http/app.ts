import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { TurnGate } from './admission.js';
import { nameSpansByRoute, tracedServerFactory, tracingEnabled } from '../observability/tracing.js';
import type { HttpConfig } from './config.js';
import { answerClientError, frameworkProblem } from './errors.js';
import { lingerOnRefusedBodies } from './linger.js';
import { listenFailure } from './port.js';
import { onGraphQLRoute, problem, problemAt, sendProblem } from './problem.js';
import { exposeRequestId, requestIdOf } from './request-id.js';
import { RouteTable } from './route-table.js';

/*
 * The one HTTP application of the gateway and of every subgraph server: the same body limit, header and
 * request timeouts, request ids, problem-details answers for every error (router, parser, Node's own
 * client errors), JSON bodies only, uncompressed, and a lingering close for bodies refused unread.
 */

export interface HttpAppOptions {
  /**
   * Body parses and operations wait for their turn of the event loop (gateway/http/admission.ts): the
   * gateway's choice; a subgraph server serves its gateway's planned fetches as they come. @default false
   */
  admission?: boolean;
}

/**
 * The root instance every part registers on (as a fastify plugin), decorated with the route table
 * (`routeTable`) and the turn gate (`admission`, null without one).
 */
export function createHttpApp(config: HttpConfig, options: HttpAppOptions = {}): FastifyInstance {
  const http = {
    headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    connectionsCheckingInterval: Math.min(1000, Math.ceil(config.HTTP_HEADERS_TIMEOUT_MS / 4)),
  };
  const app = Fastify({
    logger: { level: config.LOG_LEVEL },
    // One id per request, the caller's X-Request-Id when acceptable (gateway/http/request-id.ts); a
    // subgraph server's log lines carry the id its gateway forwarded.
    genReqId: requestIdOf,
    requestIdHeader: false,
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A request whose headers or body stall is answered 408 and closed (answerClientError). Node checks
    // its timers every connectionsCheckingInterval, so that interval bounds how late the 408 comes.
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    http,
    // With tracing on, each request runs inside its server span (gateway/observability/tracing.ts).
    ...(tracingEnabled() ? { serverFactory: tracedServerFactory(http) } : {}),
    // Router errors (a malformed URL, an over-long path segment) and requests Node cannot parse are
    // problem details too.
    frameworkErrors: (error, request, reply) => void sendProblem(reply, frameworkProblem(error, request)),
    clientErrorHandler: answerClientError,
    // HEAD is declared per route (REST GETs, /health); Apollo's /graphql does not serve it.
    exposeHeadRoutes: false,
    // A part takes as long as its start does (a database migrated, a subgraph's models or world loaded,
    // each bounded by its own timeouts), not fastify's default of 10 s for a plugin to load.
    pluginTimeout: 0,
  });
  // A body refused unread (413) is answered and the connection closed without a reset (gateway/http/linger.ts).
  lingerOnRefusedBodies(app);
  const routes = new RouteTable(app);
  app.decorate('routeTable', routes);
  const admission = options.admission ? new TurnGate() : null;
  app.decorate('admission', admission);
  exposeRequestId(app);
  if (tracingEnabled()) nameSpansByRoute(app);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const body = frameworkProblem(error, request);
    if (body.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, body);
  });
  app.setNotFoundHandler(routes.notFound);

  // Bodies are JSON: without a text/plain parser, any other media type is 415 (as docs/operations.md
  // documents). An empty body sent with Content-Type: application/json (common for POSTs that carry
  // nothing, such as completing a booking) is no body, not a parse error; everything else is fastify's
  // own JSON parsing, prototype-poisoning keys refused. The text is kept as received (`rawBody`): a
  // subgraph server checks its gateway's signature over it.
  app.decorateRequest('rawBody', '');
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    request.rawBody = text;
    if (text === '') {
      done(null, undefined);
      return;
    }
    if (admission) void admission.enter().then(() => parseJson(request, text, done));
    else void parseJson(request, text, done);
  });
  // Bodies are read as sent: a compressed body would be parsed as if it were plain JSON. Checked once the
  // credential is (onRequest hooks), before the body is read.
  app.addHook('preParsing', async (request, reply) => {
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding === undefined || encoding === '' || encoding === 'identity') return;
    const detail = `Content-Encoding ${encoding} is not supported: send the body uncompressed`;
    await sendProblem(reply, problemAt(onGraphQLRoute(request), problem('UNSUPPORTED_MEDIA_TYPE', detail, { instance: request.url })));
    return reply;
  });
  return app;
}

/**
 * Ends, before the server drains its connections, something that holds them open (sockets, streams). A
 * failure is logged, never thrown: fastify skips the preClose hooks after one that rejects, and the
 * connections they hold would keep the close waiting.
 */
export function closeBeforeDrain(app: FastifyInstance, what: string, close: () => unknown): void {
  app.addHook('preClose', async () => {
    try {
      await close();
    } catch (error) {
      app.log.warn({ err: error }, `${what} not closed cleanly`);
    }
  });
}

/**
 * Loads every registered part, then listens on HOST:PORT and returns the base URL (`http://127.0.0.1:4000`).
 * A part that fails to load, or a listen that fails, closes what was opened (every part's `onClose`) and
 * throws: a listen failure as a one-line startup error naming the cause.
 */
export async function readyAndListen(app: FastifyInstance, config: Pick<HttpConfig, 'HOST' | 'PORT'>): Promise<string> {
  try {
    await app.ready();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  try {
    const address = await app.listen({ port: config.PORT, host: config.HOST });
    return address.replace('[::1]', '127.0.0.1');
  } catch (error) {
    await app.close().catch(() => undefined);
    throw listenFailure(error, config.HOST, config.PORT);
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered, by path (gateway/http/route-table.ts). */
    routeTable: RouteTable;
    /** The turn of the event loop body parses and operations wait for; null where there is none. */
    admission: TurnGate | null;
  }
  interface FastifyRequest {
    /** The JSON body as received: the text a subgraph server's signature check covers. */
    rawBody: string;
  }
}
