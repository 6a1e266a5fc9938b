import { z } from 'zod';
import { configSection, intFrom, type ConfigValues } from '../../platform/config.js';

/** The gateway's security room's section of the configuration: browsers, rate limits and request limits (docs/operations.md, generated from it). */
export const securityConfig = configSection('gateway/security', 'gateway/security/config.ts', {
  CORS_ORIGINS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const origins = (raw ?? '')
        .split(',')
        .map((o) => o.trim())
        .filter((o) => o.length > 0);
      for (const origin of origins) {
        let parsed: URL | null;
        try {
          parsed = new URL(origin);
        } catch {
          parsed = null;
        }
        if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
          ctx.addIssue({
            code: 'custom',
            message: `CORS_ORIGINS entry "${origin}" must be an exact origin such as https://app.example.com (no path, no trailing slash)`,
          });
          return z.NEVER;
        }
      }
      return origins;
    })
    .describe('comma-separated browser origins allowed to call the API; cross-site POSTs and WebSockets from any other are 403 ([Auth](#auth))'),
  RATE_LIMIT_PER_S: intFrom('RATE_LIMIT_PER_S', 0, 1_000_000)
    .default(50)
    .describe(
      'per-principal token bucket of a gateway process: tokens refilled per second (0: no limit); an operation costs one token, a heavy one more; the demo principal is not limited ([Auth](#auth))',
    ),
  RATE_LIMIT_BURST: intFrom('RATE_LIMIT_BURST', 1, 1_000_000).default(200).describe("the bucket's size: the most tokens a principal can spend at once"),
  GRAPHQL_MAX_TOKENS: intFrom('GRAPHQL_MAX_TOKENS', 50, 1_000_000)
    .default(1000)
    .describe('lexical tokens of a GraphQL document; the parser stops at the limit ([Request limits](#request-limits))'),
  GRAPHQL_MAX_DEPTH: intFrom('GRAPHQL_MAX_DEPTH', 2, 1000).default(10).describe('nesting of selections, fragments followed'),
  GRAPHQL_MAX_ALIASES: intFrom('GRAPHQL_MAX_ALIASES', 0, 100_000).default(15).describe('aliased fields of an operation, fragments expanded'),
  GRAPHQL_MAX_ROOT_FIELDS: intFrom('GRAPHQL_MAX_ROOT_FIELDS', 1, 100_000).default(20).describe('fields at the root of an operation, fragments expanded'),
  GRAPHQL_MAX_FIELDS: intFrom('GRAPHQL_MAX_FIELDS', 1, 1_000_000).default(200).describe('field selections of an operation, fragments expanded'),
  GRAPHQL_MAX_DIRECTIVES: intFrom('GRAPHQL_MAX_DIRECTIVES', 0, 100_000).default(50).describe('directives written in a document'),
  GRAPHQL_MAX_COST: intFrom('GRAPHQL_MAX_COST', 1, 100_000_000).default(5000).describe('static cost of an operation'),
  GRAPHQL_DEFAULT_LIST_SIZE: intFrom('GRAPHQL_DEFAULT_LIST_SIZE', 1, 100_000)
    .default(10)
    .describe('size assumed for a list field that declares none (every field of this supergraph declares one; a test keeps it so)'),
});

export type SecurityConfig = ConfigValues<typeof securityConfig.shape>;
