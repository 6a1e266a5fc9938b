import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { problem, sendProblem } from '../http/problem.js';

/*
 * /docs: a reference page for /openapi.json, rendered in the browser by RapiDoc (an MIT web component,
 * served from this server: the page loads nothing from anywhere else). Its prebuilt bundle is put in
 * .build/api-reference/ by `npm run build` (tools/build.mjs), taken from the registry's tarball of one
 * pinned version: the package's own dependency chain is never installed.
 */

const RAPIDOC_FILE = fileURLToPath(new URL('../../.build/api-reference/rapidoc-min.js', import.meta.url));

/** Only this server's own script and the document; RapiDoc styles its shadow DOM inline. */
const CSP =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ops-supergraph REST reference</title>
<link rel="icon" href="data:,">
<script type="module" src="/docs/rapidoc-min.js"></script>
</head>
<body>
<rapi-doc spec-url="/openapi.json" render-style="read" show-header="false" allow-server-selection="false"
  allow-authentication="true" schema-style="table" regular-font="system-ui, sans-serif" mono-font="ui-monospace, monospace"
  load-fonts="false" theme="light"></rapi-doc>
</body>
</html>
`;

export function registerApiReference(app: FastifyInstance): void {
  let script: Buffer | undefined;
  app.get('/docs', { config: { public: true }, exposeHeadRoute: true }, async (_request, reply) =>
    reply.header('content-security-policy', CSP).header('x-content-type-options', 'nosniff').type('text/html; charset=utf-8').send(PAGE),
  );
  app.get('/docs/rapidoc-min.js', { config: { public: true }, exposeHeadRoute: true }, async (request, reply) => {
    try {
      script ??= readFileSync(RAPIDOC_FILE);
    } catch {
      return sendProblem(
        reply,
        problem(
          'SERVICE_UNAVAILABLE',
          'The API reference renderer is not built (.build/api-reference/): run `npm run build` with network. /openapi.json is served as ever.',
          {
            instance: request.url,
          },
        ),
      );
    }
    return reply
      .header('cache-control', 'public, max-age=86400')
      .header('x-content-type-options', 'nosniff')
      .type('text/javascript; charset=utf-8')
      .send(script);
  });
}
