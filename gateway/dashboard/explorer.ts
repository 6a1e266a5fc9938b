import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isDemoMode, sectionOf, type PlatformConfig } from '../../platform/config.js';
import { prefersPage } from '../http/accept.js';
import { problem, sendProblem } from '../http/problem.js';
import { dashboardConfig, type DashboardConfig } from './config.js';
import { DASHBOARD_DIR, pageHeaders, pagePolicy } from './plugin.js';

/*
 * The GraphQL explorer: GraphiQL, built into the dashboard's bundle at install (web/explorer.html), served at
 * `/graphiql`, nothing loaded from another host. A browser that opens `/graphql` (an Accept that prefers a
 * page) is sent there before anything else looks at the request, so it arrives even where every request
 * needs a credential: the page holds no data, and each operation it sends carries the credential typed
 * into its headers, through the same pipeline as any other. Off, `/graphql` answers a browser 406 as before.
 */

/** Where the explorer's page is served. */
const EXPLORER_PATH = '/graphiql';

export interface ExplorerPluginOptions {
  config: PlatformConfig & DashboardConfig;
  /** @default web/dist */
  dir?: string;
}

/**
 * Whether a GET names an operation (a client whose default Accept ranks text/html first, as Java's
 * `HttpURLConnection`, asking `/graphql?query=...`): it is answered as GraphQL, never sent to the page.
 */
function namesOperation(request: FastifyRequest): boolean {
  const query = request.query as Record<string, unknown> | null;
  return query !== null && typeof query === 'object' && ['query', 'documentId', 'doc_id', 'extensions'].some((name) => name in query);
}

/** Whether the explorer is served under this configuration: `on`, or `demo` in demo mode. */
function explorerEnabled(config: PlatformConfig & DashboardConfig): boolean {
  return config.GRAPHQL_EXPLORER === 'on' || (config.GRAPHQL_EXPLORER === 'demo' && isDemoMode(config));
}

/**
 * The `explorer` part: `/graphiql`, and the browser's way there from `/graphql`. Registered before the edge
 * guard, whose credential check would otherwise answer a browser 401 before it could be sent to the page.
 */
export const explorerPlugin = fp(
  async (app: FastifyInstance, options: ExplorerPluginOptions) => {
    const config = { ...options.config, ...sectionOf(dashboardConfig, options.config, 'explorer') };
    if (!explorerEnabled(config)) return;
    const file = join(options.dir ?? DASHBOARD_DIR, 'explorer.html');
    const page = existsSync(file) ? readFileSync(file) : null;
    app.addHook('onRequest', async (request, reply) => {
      if (request.method === 'GET' && request.routeOptions.url === '/graphql' && prefersPage(request.headers.accept) && !namesOperation(request)) {
        // Relative, so the page is found behind a proxy that mounts the gateway under a path.
        return reply.code(303).header('location', EXPLORER_PATH.slice(1)).header('cache-control', 'no-store').send();
      }
    });
    app.get(EXPLORER_PATH, { config: { public: true }, exposeHeadRoute: true }, async (request: FastifyRequest, reply: FastifyReply) => {
      if (!page) {
        return sendProblem(
          reply,
          problem('SERVICE_UNAVAILABLE', 'The explorer is not built: run npm run build:web (npm ci and npm start build it)', { instance: request.url }),
        );
      }
      return pageHeaders(reply, pagePolicy(request.headers.host, { editor: true }))
        .type('text/html; charset=utf-8')
        .send(page);
    });
  },
  { name: 'explorer', fastify: '5.x' },
);
