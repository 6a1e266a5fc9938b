import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { problem, sendProblem } from '../http/problem.js';

/** Where `npm run build:web` (run by `npm ci` and, when it is missing, by `npm start`) writes the dashboard. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../web/dist/', import.meta.url));

/** Whether the dashboard has been built. */
export function dashboardBuilt(dir = DASHBOARD_DIR): boolean {
  return existsSync(join(dir, 'index.html'));
}

interface Asset {
  body: Buffer;
  type: string;
  /** Named by a content hash (Vite's `assets/`): cached for good. */
  immutable: boolean;
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

/** A Host header this server can be reached at, to name in the policy's connect-src; anything else is left out. */
const HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * A page's Content-Security-Policy: scripts, styles, images and fonts from this origin only, no inline
 * code, no plugins, no framing. `connect-src 'self'` covers the same-origin WebSocket in CSP Level 3;
 * the ws:/wss: origin of the Host the page was asked at is named as well for browsers that predate it.
 * The explorer's editor (Monaco) sets inline styles as it lays out text and runs workers of this origin:
 * `editor` allows those two, nothing more.
 */
export function pagePolicy(host: string | undefined, options: { editor?: boolean } = {}): string {
  const sockets = host && HOST.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    ...(options.editor ? ["worker-src 'self'", "style-src 'self' 'unsafe-inline'", "font-src 'self' data:"] : ["style-src 'self'", "font-src 'self'"]),
    "img-src 'self' data:",
    `connect-src 'self'${sockets}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The headers of a page: its policy, no sniffing, no referrer, asked again every time. */
export function pageHeaders(reply: FastifyReply, policy: string): FastifyReply {
  return reply
    .header('content-security-policy', policy)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache');
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(path) : entry.isFile() ? [path] : [];
  });
}

/**
 * Serves the operations dashboard (web/, built to web/dist) at `/` and its files at their paths, all
 * public: the page holds no data, and everything it shows comes over the GraphQL WebSocket, which asks for
 * the key itself. The files are read once at start (a few hundred KB). When the build is missing, `/` is
 * a 503 problem that says how to build it; the API is unaffected.
 */
export const dashboardPlugin = fp(async (app: FastifyInstance, options: { dir?: string }) => registerDashboard(app, options.dir ?? DASHBOARD_DIR), {
  name: 'dashboard',
  fastify: '5.x',
});

function registerDashboard(app: FastifyInstance, dir: string): void {
  const route = { config: { public: true }, exposeHeadRoute: true } as const;
  if (!dashboardBuilt(dir)) {
    app.get('/', route, async (request, reply) =>
      sendProblem(
        reply,
        problem('SERVICE_UNAVAILABLE', 'The dashboard is not built: run npm run build:web (npm ci and npm start build it)', { instance: request.url }),
      ),
    );
    return;
  }
  const assets = new Map<string, Asset>();
  for (const file of filesUnder(dir)) {
    const path = `/${relative(dir, file).split(sep).join('/')}`;
    assets.set(path, {
      body: readFileSync(file),
      type: TYPES[extname(file)] ?? 'application/octet-stream',
      immutable: path.startsWith('/assets/'),
    });
  }
  const page = assets.get('/index.html');
  assets.delete('/index.html');
  // The explorer's page is served at /graphiql by its own part (gateway/dashboard/explorer.ts), when it is on.
  assets.delete('/explorer.html');
  if (!page) return;

  app.get('/', route, async (request: FastifyRequest, reply: FastifyReply) =>
    pageHeaders(reply, pagePolicy(request.headers.host)).type(page.type).send(page.body),
  );
  for (const [path, asset] of assets) {
    app.get(path, route, async (_request, reply) =>
      reply
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
        .type(asset.type)
        .send(asset.body),
    );
  }
}
