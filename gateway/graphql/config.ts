import { z } from 'zod';
import { boolFrom, configSection, intFrom, type ConfigValues } from '../../platform/config.js';

const TRUSTED_DOCUMENT_MODES = ['off', 'allow', 'safelist'] as const;
export type TrustedDocumentMode = (typeof TRUSTED_DOCUMENT_MODES)[number];

/** The gateway's graphql room's section of the configuration: persisted queries and trusted documents (docs/operations.md, generated from it). */
export const graphqlConfig = configSection('gateway/graphql', 'gateway/graphql/config.ts', {
  SUPERGRAPH_FILE: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe(
      'the supergraph SDL to serve (default: `schema/supergraph.graphql`, checked in); when set, the gateway serves the file anew whenever it changes, as on `SIGHUP` ([Changing the schema](operations.md#changing-the-schema))',
    ),
  SUPERGRAPH_POLL_MS: intFrom('SUPERGRAPH_POLL_MS', 50, 60_000).default(1000).describe('how often `SUPERGRAPH_FILE` is looked at for a change'),
  TRUSTED_DOCUMENTS: z
    .enum(TRUSTED_DOCUMENT_MODES)
    .optional()
    .describe(
      '`off`: operations are sent as text (or as APQ hashes); `allow`: registered documents resolve by id, text still runs; `safelist`: principals without `schema:free-text` (or `ops:admin`) run registered documents only, text answers 403 `PERSISTED_QUERY_NOT_IN_LIST`. Default `off` in demo mode, `allow` otherwise ([Operations](operations.md#trusted-documents))',
    ),
  TRUSTED_DOCUMENTS_DIR: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe(
      'folder of manifests, one per client (`<client>.json`, Apollo or Relay format) and `clients.json` naming the principals each client may act for; read at start and on `SIGHUP`',
    ),
  APQ_CACHE_MB: intFrom('APQ_CACHE_MB', 0, 1024)
    .default(16)
    .describe(
      'memory for automatic persisted queries (hash to text, least recently used first out); `0` turns APQ off (a hash answers `PERSISTED_QUERY_NOT_SUPPORTED`)',
    ),
  GRAPHQL_MAX_BATCH: intFrom('GRAPHQL_MAX_BATCH', 0, 1000)
    .default(10)
    .describe(
      "operations one POST to `/graphql` may carry as a batch (a JSON array, as Apollo Client's `BatchHttpLink` sends); more answers 422 `BATCH_LIMIT_EXCEEDED` and runs nothing; `0` turns batching off ([Operations](operations.md#batches))",
    ),
  GRAPHQL_DIRECT_EXECUTION: boolFrom('GRAPHQL_DIRECT_EXECUTION', 'true').describe(
    "queries and mutations sent as JSON over POST run without Apollo Server's per-request pipeline, with the same policies, executor, status, headers and body ([Performance](performance.md#like-for-like-nothing-shared)); `false` sends every `/graphql` request through Apollo Server",
  ),
});

export type GraphQLConfig = ConfigValues<typeof graphqlConfig.shape>;
