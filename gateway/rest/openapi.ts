import { readFileSync } from 'node:fs';
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { errorCatalogue, type ErrorCode } from '../../platform/errors.js';
import type { RestRoute } from '../../platform/rest.js';

/*
 * The OpenAPI 3.1 document of the REST façade, generated from the route tables the REST engine serves
 * (the same zod schemas that check each request, and each route's documented answer), so the contract
 * partners read is the one the server enforces. Served at /openapi.json; /docs renders it locally.
 */

/** The project's version, from package.json. */
export const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface RestModule {
  name: string;
  restPrefix: string;
  routes: readonly RestRoute[];
}

/** RFC 9457 problem details as every REST error is answered (gateway/http/problem.ts). */
const errorCodes = Object.keys(errorCatalogue) as [ErrorCode, ...ErrorCode[]];
const problemSchema = z
  .strictObject({
    type: z.string().describe('urn:ops-supergraph:problem:<code in kebab case>'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().describe('One sentence; for input errors it names each offending field'),
    code: z.enum(errorCodes).describe('The error catalogue code (docs/architecture.md, "Error catalogue")'),
    instance: z.string().optional().describe('The request path'),
    errors: z
      .array(z.strictObject({ field: z.string(), message: z.string() }))
      .optional()
      .describe('Input errors: the first 25 offending fields, named as the caller sent them'),
    errors_truncated: z.number().int().optional().describe('How many more field problems were left out'),
  })
  .meta({ id: 'Problem' });

/** Codes every path may answer, by what it takes. */
function commonErrors(route: RestRoute, keysRequired: boolean): ErrorCode[] {
  const codes: ErrorCode[] = [];
  if (route.body || route.query || route.params) codes.push('BAD_USER_INPUT');
  if (keysRequired && !route.public) codes.push('UNAUTHENTICATED', 'FORBIDDEN');
  if (route.body) codes.push('PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE');
  // Every path runs its operation through the gateway: a subgraph it cannot reach (distributed mode) is 502.
  codes.push('UPSTREAM_UNAVAILABLE', 'SERVICE_UNAVAILABLE', 'INTERNAL_SERVER_ERROR');
  return codes;
}

function errorResponses(codes: readonly ErrorCode[]): Record<number, ResponseConfig> {
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of codes) {
    const status = errorCatalogue[code].status;
    const set = byStatus.get(status) ?? new Set<ErrorCode>();
    set.add(code);
    byStatus.set(status, set);
  }
  const out: Record<number, ResponseConfig> = {};
  for (const [status, set] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const listed = [...set].map((c) => `\`${c}\` (${errorCatalogue[c].title.toLowerCase()})`).join(', ');
    out[status] = {
      description: `Problem details: ${listed}`,
      ...(status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } } } : {}),
      ...(status === 401 ? { headers: { 'WWW-Authenticate': { description: 'Bearer realm="ops-supergraph"', schema: { type: 'string' } } } } : {}),
      content: { 'application/problem+json': { schema: problemSchema } },
    };
  }
  return out;
}

/** fastify's `/booking/:booking_id/track` as OpenAPI's `/booking/{booking_id}/track`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

function operationId(module: RestModule, route: RestRoute): string {
  const words = `${route.method.toLowerCase()} ${module.name} ${route.path}`
    .replace(/:([a-z_]+)/g, 'by $1')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return words
    .map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1)))
    .join('')
    .replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
}

function routeConfig(module: RestModule, route: RestRoute, options: OpenApiOptions): RouteConfig {
  const { keysRequired } = options;
  // The scopes the route's operation needs (from the supergraph's declarations), on either scheme.
  const scopes = options.scopesOf?.(route.operation) ?? [];
  const representations = Object.entries(route.representations ?? {});
  const bodyTypes = Object.keys(route.textBodies ?? {});
  return {
    method: route.method.toLowerCase() as RouteConfig['method'],
    path: openApiPath(`${module.restPrefix}${route.path}`),
    operationId: operationId(module, route),
    summary: route.summary,
    tags: [module.name],
    ...(route.public ? { security: [] } : scopes.length > 0 ? { security: [{ apiKey: scopes }, { bearer: scopes }] } : {}),
    request: {
      ...(route.params ? { params: route.params as z.ZodObject } : {}),
      ...(route.query ? { query: route.query as z.ZodObject } : {}),
      ...(route.headers ? { headers: route.headers } : {}),
      ...(route.body
        ? {
            body: {
              required: true,
              content: {
                'application/json': { schema: route.body },
                ...Object.fromEntries(bodyTypes.map((type) => [type, { schema: z.string().describe(`The same body as ${type}`) }])),
              },
            },
          }
        : {}),
    },
    responses: {
      200: {
        description: representations.length > 0 ? `JSON by default; ${representations.map(([t, d]) => `${t} (${d})`).join('; ')} by Accept` : 'Success',
        content: {
          'application/json': { schema: route.response },
          ...Object.fromEntries(representations.map(([type]) => [type, { schema: z.string() }])),
        },
      },
      ...errorResponses([...commonErrors(route, keysRequired), ...(route.errors ?? [])]),
    },
  };
}

export interface OpenApiOptions {
  /** Whether API keys are configured: non-public paths then answer 401 without one. */
  keysRequired: boolean;
  version: string;
  /** The scopes a route's operation needs (gateway/security/authorization.ts); listed in each path's `security`. */
  scopesOf?: (operation: string) => string[];
}

/** The OpenAPI 3.1 document of every module's REST paths. */
export function buildOpenApiDocument(modules: readonly RestModule[], options: OpenApiOptions): ReturnType<OpenApiGeneratorV31['generateDocument']> {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'apiKey', { type: 'apiKey', in: 'header', name: 'x-api-key' });
  registry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  for (const module of modules) for (const route of module.routes) registry.registerPath(routeConfig(module, route, options));
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'ops-supergraph REST',
      version: options.version,
      description:
        'The REST paths of the supergraph: each runs a GraphQL operation through the gateway, answers snake_case JSON ' +
        '(instants as ISO 8601 UTC with milliseconds, e.g. 2026-11-22T08:00:00.000Z), ' +
        'and reports every error as RFC 9457 problem details with a catalogued `code`. GraphQL is served at /graphql.',
    },
    servers: [{ url: '/' }],
    // Keys are configured per deployment: when API_KEYS is set, every path not marked otherwise takes one.
    security: options.keysRequired ? [{ apiKey: [] }, { bearer: [] }] : [{}, { apiKey: [] }, { bearer: [] }],
    tags: modules.map((m) => ({ name: m.name, description: `REST paths of the ${m.name} subgraph, under ${m.restPrefix}` })),
  });
}
