import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { problem, sendProblem } from '../http/problem.js';

/*
 * Browsers. Frontends on the origins in CORS_ORIGINS (exact `scheme://host[:port]`, none by default) may
 * call the API: their preflights are answered with the methods and headers the API takes, and their
 * answers carry `Access-Control-Allow-Origin`. Any other web page can still make a browser *send* a
 * request (a form, `fetch(url, { mode: 'no-cors' })`, a WebSocket): every request that could change state
 * and that a browser marks as coming from another site, whose origin is not allowed, is refused with 403
 * before anything runs, bodyless POSTs included, as Apollo Server's CSRF prevention does for GraphQL.
 * Clients that are not browsers send no `Origin` and `Sec-Fetch-Site` and are not affected.
 */

const ALLOWED_METHODS = 'GET, HEAD, POST, OPTIONS';
// `state-position` both ways: a browser client reads a write's position and sends it back (read-your-writes).
const ALLOWED_HEADERS = 'authorization, x-api-key, content-type, accept, idempotency-key, x-request-id, state-position';
const EXPOSED_HEADERS = 'x-request-id, retry-after, www-authenticate, allow, state-position';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const header = (headers: IncomingHttpHeaders, name: string) => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

export class BrowserOrigins {
  private readonly allowed: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.allowed = new Set(origins);
  }

  isAllowed(origin: string | undefined): boolean {
    return origin !== undefined && this.allowed.has(origin);
  }

  /**
   * Whether a browser sent this request from a page of another site or origin that is not allowed: by
   * `Sec-Fetch-Site` where the browser sends it, else by an `Origin` whose host is not the one asked.
   */
  isForeign(headers: IncomingHttpHeaders): boolean {
    const origin = header(headers, 'origin');
    if (this.isAllowed(origin)) return false;
    const site = header(headers, 'sec-fetch-site');
    if (site === 'cross-site' || site === 'same-site') return true;
    if (site === 'same-origin' || site === 'none') return false;
    if (origin === undefined) return false;
    if (origin === 'null') return true;
    try {
      return new URL(origin).host !== header(headers, 'host');
    } catch {
      return true;
    }
  }
}

/** The CORS and cross-site hooks; registered before authentication, since a preflight carries no credential. */
export function registerBrowserRules(app: FastifyInstance, origins: BrowserOrigins): void {
  app.addHook('onRequest', async (request, reply) => {
    const origin = header(request.headers, 'origin');
    if (origin !== undefined) void reply.header('vary', 'Origin');
    const allowed = origins.isAllowed(origin);
    if (allowed) {
      void reply.header('access-control-allow-origin', origin);
      void reply.header('access-control-expose-headers', EXPOSED_HEADERS);
    }
    if (request.method === 'OPTIONS' && header(request.headers, 'access-control-request-method') !== undefined) {
      if (!allowed) {
        await sendProblem(
          reply,
          problem('FORBIDDEN', `Origin ${origin ?? '(none)'} is not allowed to call this API (CORS_ORIGINS)`, { instance: request.url }),
        );
        return reply;
      }
      void reply.header('access-control-allow-methods', ALLOWED_METHODS);
      void reply.header('access-control-allow-headers', ALLOWED_HEADERS);
      void reply.header('access-control-max-age', '600');
      return reply.code(204).send();
    }
    if (!SAFE_METHODS.has(request.method) && origins.isForeign(request.headers)) {
      await sendProblem(
        reply,
        problem('FORBIDDEN', `A ${request.method} from a page of another site (${origin ?? 'unknown origin'}) is refused: its origin is not in CORS_ORIGINS`, {
          instance: request.url,
        }),
      );
      return reply;
    }
  });
}
