import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
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
   * Waited for before a JSON body is parsed (the gateway's turn of the event loop, gateway/http/admission.ts).
   * @default none
   */
  beforeParse?: () => Promise<void>;
}

export interface HttpApp {
  app: FastifyInstance;
  /** Every route registered, by path: 405 with `Allow` for a known path, public routes (gateway/http/route-table.ts). */
  routes: RouteTable;
  /** What the server closes when it stops, last added first (Closers, below). */
  closers: Closers;
}

export function createHttpApp(config: HttpConfig, options: HttpAppOptions = {}): HttpApp {
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
  });
  // A body refused unread (413) is answered and the connection closed without a reset (gateway/http/linger.ts).
  lingerOnRefusedBodies(app);
  const routes = new RouteTable(app);
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
  const { beforeParse } = options;
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    request.rawBody = text;
    if (text === '') {
      done(null, undefined);
      return;
    }
    if (beforeParse) void beforeParse().then(() => parseJson(request, text, done));
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
  return { app, routes, closers: new Closers() };
}

/**
 * What a server closes when it stops, each once, the last added first (the socket servers before the
 * HTTP app, the app before the databases it reads). A close that fails does not keep the rest open: the
 * first failure is thrown once every closer has run.
 */
class Closers {
  private readonly list: Array<() => unknown> = [];
  private closing: Promise<void> | undefined;

  add(close: () => unknown): void {
    this.list.push(close);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      let failure: { error: unknown } | undefined;
      for (const close of this.list.reverse()) {
        try {
          await close();
        } catch (error) {
          failure ??= { error };
        }
      }
      if (failure) throw failure.error;
    })();
    return this.closing;
  }
}

/**
 * Listens on HOST:PORT and returns the base URL (`http://127.0.0.1:4000`); a listen that fails closes
 * what was opened and throws a one-line startup error naming the cause.
 */
export async function listenOrClose(http: HttpApp, config: Pick<HttpConfig, 'HOST' | 'PORT'>): Promise<string> {
  try {
    const address = await http.app.listen({ port: config.PORT, host: config.HOST });
    return address.replace('[::1]', '127.0.0.1');
  } catch (error) {
    await http.closers.close().catch(() => undefined);
    throw listenFailure(error, config.HOST, config.PORT);
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body as received: the text a subgraph server's signature check covers. */
    rawBody: string;
  }
}
