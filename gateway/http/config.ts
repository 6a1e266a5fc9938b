import { z } from 'zod';
import { boolFrom, configSection, intFrom, logLevels, type ConfigValues } from '../../platform/config.js';

/** The gateway's http room's section of the configuration: the HTTP servers of the gateway and of subgraph servers (docs/operations.md, generated from it). */
export const httpConfig = configSection(
  'gateway/http',
  'gateway/http/config.ts',
  {
    PORT: intFrom('PORT', 0, 65535).default(4000).describe('TCP port of the one HTTP server'),
    HOST: z
      .string()
      .trim()
      .min(1)
      .default('127.0.0.1')
      .describe(
        'interface to bind (`0.0.0.0` in a container); demo mode has no auth, so the default stays on loopback, and beyond it a start without a credential stops unless `DEMO_MODE_BEYOND_LOOPBACK=true`',
      ),
    DEMO_MODE_BEYOND_LOOPBACK: boolFrom('DEMO_MODE_BEYOND_LOOPBACK', 'false').describe(
      'serve demo mode (no `API_KEYS`, `API_KEYS_FILE` or `AUTH_JWKS_URL`: every caller is one principal holding every scope, `ops:admin` included) on a `HOST` other than loopback; without it such a start stops, naming the choices',
    ),
    LOG_LEVEL: z.enum(logLevels).default('info').describe('`fatal` `error` `warn` `info` `debug` `trace` `silent`'),
    BODY_LIMIT_BYTES: intFrom('BODY_LIMIT_BYTES', 1024, 64 * 1024 * 1024)
      .default(1024 * 1024)
      .describe(
        'largest request body; larger gets 413 `Connection: close`, read by every client: the server discards the rest of the body and closes after the client (a lingering close, at most 2 s idle and 10 s in all), never with a reset',
      ),
    HTTP_HEADERS_TIMEOUT_MS: intFrom('HTTP_HEADERS_TIMEOUT_MS', 100, 600_000)
      .default(10_000)
      .describe('a request whose headers have not all arrived by then is answered 408 and closed'),
    HTTP_REQUEST_TIMEOUT_MS: intFrom('HTTP_REQUEST_TIMEOUT_MS', 100, 3_600_000)
      .default(30_000)
      .describe('a request (headers and body) not received whole by then is answered 408 and closed; at least `HTTP_HEADERS_TIMEOUT_MS`'),
  },
  (config) =>
    config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS
      ? ['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)']
      : [],
);

export type HttpConfig = ConfigValues<typeof httpConfig.shape>;
