import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Scope } from '../../platform/principal.js';
import { GRAPHQL_PATH, pathOf, problem, problemAt, sendProblem } from './problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Served without an API key when API_KEYS is set: a public document (the JWKS) or a probe (/health).
     * Declared on the route, read by the one credential check. @default false
     */
    public?: boolean;
    /**
     * The scope a credential must hold to use the route (an operator holds every scope); checked by the
     * credential check right after authentication, before the body is read. REST routes are judged on
     * their operations instead. @default none
     */
    requires?: Scope;
  }
}

/** What the server knows about one path, whatever the method. */
export interface KnownPath {
  /** Every method the path serves, OPTIONS included, in a stable order (the `Allow` header). */
  methods: string[];
  public: boolean;
  /** The route URLs that match the path (`/graphql`, `/rental/booking/:booking_id`). */
  routes: string[];
}

interface Entry {
  url: string;
  pattern: RegExp;
  methods: Set<string>;
  public: boolean;
}

/** A path as the router reads it: percent-encoding decoded (a path that does not decode is taken as sent). */
function decodedPath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

const ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** A fastify route URL (`/booking/:booking_id/track`, `/files/*`) as a regular expression over paths. */
function patternOf(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) => {
      if (segment === '*') return '.*';
      if (segment.startsWith(':')) return '[^/]+';
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return new RegExp(`^${source}$`);
}

/**
 * Every route the server registers, by path, collected from fastify's `onRoute` hook (REST tables,
 * /graphql, /health alike). Create it before any route is registered. A request that matches no route
 * is looked up here by path alone: a known path with a method it does not serve is 405 with `Allow`
 * (OPTIONS: 204 with `Allow`), never 404.
 */
export class RouteTable {
  private readonly entries: Entry[] = [];

  constructor(app: FastifyInstance) {
    app.addHook('onRoute', (route) => {
      const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((m) => m.toUpperCase());
      let entry = this.entries.find((e) => e.url === route.url);
      if (!entry) {
        entry = { url: route.url, pattern: patternOf(route.url), methods: new Set(), public: false };
        this.entries.push(entry);
      }
      for (const method of methods) entry.methods.add(method);
      if (route.config?.public === true) entry.public = true;
    });
  }

  /** The path's methods and publicity, or null for a path no route serves. */
  match(path: string): KnownPath | null {
    path = decodedPath(path);
    const found = this.entries.filter((e) => e.pattern.test(path));
    if (found.length === 0) return null;
    const methods = new Set(found.flatMap((e) => [...e.methods]));
    methods.add('OPTIONS');
    return { methods: ORDER.filter((m) => methods.has(m)), public: found.some((e) => e.public), routes: found.map((e) => e.url) };
  }

  /** Every registered route URL with its methods (the door matrix test classifies each). */
  list(): Array<{ url: string; methods: string[]; public: boolean }> {
    return this.entries.map((e) => ({ url: e.url, methods: ORDER.filter((m) => e.methods.has(m)), public: e.public }));
  }

  /** Whether a request may be served without a key: its route, or (for a wrong method) its path, is public. */
  isPublic(request: FastifyRequest): boolean {
    if (request.routeOptions.config.public === true) return true;
    return request.is404 && this.match(pathOf(request.url))?.public === true;
  }

  /** fastify's not-found handler: 405 (or 204 for OPTIONS) with `Allow` on a known path, 404 otherwise. */
  notFound = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = pathOf(request.url);
    const known = this.match(path);
    if (!known) return sendProblem(reply, problemAt(false, problem('NOT_FOUND', `No route for ${request.method} ${path}`, { instance: request.url })));
    const allow = known.methods.join(', ');
    reply.header('allow', allow);
    if (request.method === 'OPTIONS') return reply.code(204).send();
    const detail = `${request.method} is not allowed on ${path}; it serves ${allow}`;
    return sendProblem(reply, problemAt(known.routes.includes(GRAPHQL_PATH), problem('METHOD_NOT_ALLOWED', detail, { instance: request.url })));
  };
}
