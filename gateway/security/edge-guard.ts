import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isDemoMode, platformConfig, sectionOf, type PlatformConfig } from '../../platform/config.js';
import { hasScope, isOperator } from '../../platform/principal.js';
import { pathOf, refuse } from '../http/problem.js';
import type { RouteTable } from '../http/route-table.js';
import { createAuthenticator, type Authenticator } from './auth.js';
import { securityConfig, type SecurityConfig } from './config.js';
import { BrowserOrigins, registerBrowserRules } from './cors.js';
import { RateLimiter, rateHeaders, rateLimitedError } from './rate-limit.js';

/** The longest a rate-limited request waits for its 429. */
const REFUSAL_PAUSE_MS = 1000;

export interface EdgeGuardPluginOptions {
  config: PlatformConfig & SecurityConfig & { HOST: string };
}

/**
 * The `edge-guard` part: the credentials (`app.auth`), the browser origins allowed (`app.browserOrigins`)
 * and the rate limiter (`app.rateLimiter`), with the guard every request meets before its body is read.
 */
export const edgeGuardPlugin = fp(
  async (app: FastifyInstance, options: EdgeGuardPluginOptions) => {
    const config = { ...sectionOf(platformConfig, options.config, 'edge-guard'), ...sectionOf(securityConfig, options.config, 'edge-guard') };
    const auth = createAuthenticator(config);
    const browserOrigins = new BrowserOrigins(config.CORS_ORIGINS);
    const rateLimiter = new RateLimiter({ perSecond: config.RATE_LIMIT_PER_S, burst: config.RATE_LIMIT_BURST });
    app.decorate('auth', auth);
    app.decorate('browserOrigins', browserOrigins);
    app.decorate('rateLimiter', rateLimiter);
    registerEdgeGuard(app, { routes: app.routeTable, auth, browserOrigins, rateLimiter });
    if (isDemoMode(config)) {
      app.addHook('onListen', async () => {
        app.log.warn(
          `demo mode on ${options.config.HOST}: no credential is configured (API_KEYS, API_KEYS_FILE, AUTH_JWKS_URL), so every caller acts as the demo principal, holding every scope`,
        );
      });
    }
  },
  { name: 'edge-guard', fastify: '5.x' },
);

/** Whether a public route's request presents an operator's credential (a wrong one is simply not one). */
export async function callerIsOperator(auth: Authenticator, request: FastifyRequest): Promise<boolean> {
  if (!auth.enabled) return isOperator(auth.publicPrincipal);
  if (request.headers['x-api-key'] === undefined && request.headers.authorization === undefined) return false;
  const result = await auth.authenticate(request.headers);
  return 'principal' in result && isOperator(result.principal);
}

interface EdgeGuardOptions {
  routes: RouteTable;
  auth: Authenticator;
  browserOrigins: BrowserOrigins;
  rateLimiter: RateLimiter;
}

/**
 * The gateway's edge, before any body is read: browsers first (CORS preflights carry no credential, and a
 * cross-site state change is refused before anything else is looked at, gateway/security/cors.ts), then one
 * credential check for GraphQL over HTTP and every REST path. Every credential resolves to a principal
 * (gateway/security/auth.ts) and the request acts for it from here on; routes declared public (the JWKS,
 * /health) stay open. A route that declares a scope (/metrics) is refused without it, and the first
 * rate-limit token is taken (gateway/security/rate-limit.ts): the first token of the request's operation,
 * which the operation pipeline's rate charge counts as paid.
 */
function registerEdgeGuard(app: FastifyInstance, { routes, auth, browserOrigins, rateLimiter }: EdgeGuardOptions): void {
  registerBrowserRules(app, browserOrigins);
  app.decorateRequest('principal', null);
  app.decorateRequest('prepaid', 0);
  app.decorateRequest('credentialExpiresAt', null);
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = auth.publicPrincipal;
      return;
    }
    const result = await auth.authenticate(request.headers);
    if (!('principal' in result)) {
      return refuse(reply, request, 'UNAUTHENTICATED', `Missing or invalid credential (${result.refused}): send x-api-key or Authorization: Bearer`);
    }
    const principal = result.principal;
    request.principal = principal;
    // A stream the request opens ends when its credential does (gateway/subscriptions/http-streams.ts).
    if (result.expiresAt !== undefined) request.credentialExpiresAt = result.expiresAt;
    const requires = request.routeOptions.config.requires;
    if (requires && !hasScope(principal, requires)) {
      return refuse(reply, request, 'FORBIDDEN', `Principal ${principal.id} may not use ${pathOf(request.url)}: it needs ${requires} (or ops:admin)`);
    }
    const decision = rateLimiter.take(principal, 1);
    for (const [name, value] of rateHeaders(decision)) void reply.header(name, value);
    if (decision.allowed) {
      // The token is the first operation's: the rate charge takes it off that operation's cost.
      if (!decision.unlimited) request.prepaid = 1;
      return;
    }
    // Answered after a pause (its Retry-After, at most a second): a client that ignores Retry-After
    // cannot turn refusals into load; the pause is a timer, not work.
    await new Promise((resolve) => setTimeout(resolve, Math.min(REFUSAL_PAUSE_MS, decision.retryAfter * 1000)));
    return refuse(reply, request, 'RATE_LIMITED', rateLimitedError(principal, decision).message);
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every credential resolves to a principal here (gateway/security/auth.ts). */
    auth: Authenticator;
    /** The origins whose pages may call the gateway (gateway/security/cors.ts). */
    browserOrigins: BrowserOrigins;
    /** One token bucket per principal (gateway/security/rate-limit.ts). */
    rateLimiter: RateLimiter;
  }
}
