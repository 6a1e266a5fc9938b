import { boolFrom, configSection, intFrom, type ConfigValues } from '../../platform/config.js';

/** The gateway's sources room's section of the configuration: subgraph calls, fetch collapsing and caching, compiled execution (docs/operations.md, generated from it). */
export const sourcesConfig = configSection('gateway/sources', 'gateway/sources/config.ts', {
  SUBGRAPH_TIMEOUT_MS: intFrom('SUBGRAPH_TIMEOUT_MS', 100, 600_000)
    .default(10_000)
    .describe('a call to a subgraph over the network that takes longer counts as unavailable'),
  GATEWAY_COLLAPSE_FETCHES: boolFrom('GATEWAY_COLLAPSE_FETCHES', 'true').describe(
    'identical subgraph reads in flight at once are made once ([Architecture](architecture.md#architecture)); `false` makes each on its own',
  ),
  GATEWAY_COMPILED_EXECUTION: boolFrom('GATEWAY_COMPILED_EXECUTION', 'true').describe(
    "query plans run by the compiled executor ([Performance](performance.md#where-the-time-went-and-what-changed)); `false` runs `@apollo/gateway`'s own execution (same answers, slower; it cannot run `@defer` plans, which stay compiled)",
  ),
  SUBGRAPH_COMPILED_EXECUTION: boolFrom('SUBGRAPH_COMPILED_EXECUTION', 'true').describe(
    "subgraphs run their documents compiled by graphql-jit, called in process (one-process mode) or served on their own (`npm run subgraph`); `false` runs graphql-js's `execute` (same answers, slower)",
  ),
  GATEWAY_FETCH_CACHE_MB: intFrom('GATEWAY_FETCH_CACHE_MB', 0, 4096)
    .default(64)
    .describe(
      'memory for subgraph answers that are functions of the request alone (predictions, path recommendations; [Architecture](architecture.md#architecture)); `0` fetches every one',
    ),
  GATEWAY_FETCH_CACHE_MAX_AGE_S: intFrom('GATEWAY_FETCH_CACHE_MAX_AGE_S', 1, 86_400)
    .default(300)
    .describe(
      'seconds such an answer is served before it is fetched again: how long a subgraph redeployed with other models can still be answered by the old ones',
    ),
  STATE_CACHE_MB: intFrom('STATE_CACHE_MB', 0, 4096)
    .default(64)
    .describe(
      'memory for subgraph state reads kept until a write changes what they read, as the event log tells every gateway ([Scaling](scaling.md#the-state-cache)); `0` reads state from the subgraphs every time. With every subgraph remote it needs `DATABASE_URL` (the log it reads)',
    ),
  STATE_CACHE_TENANT_SHARE_PERCENT: intFrom('STATE_CACHE_TENANT_SHARE_PERCENT', 1, 100)
    .default(25)
    .describe("most of the state cache's memory one tenant's entries may hold; answers every caller may see (the fleet) share the whole"),
  STATE_CACHE_MAX_LAG_MS: intFrom('STATE_CACHE_MAX_LAG_MS', 100, 60_000)
    .default(1000)
    .describe(
      'the state cache serves nothing while this gateway has not caught up with the event log within this bound: how stale a cached read can be after a write made elsewhere',
    ),
  STATE_CACHE_WAIT_MS: intFrom('STATE_CACHE_WAIT_MS', 0, 10_000)
    .default(500)
    .describe('how long a request carrying a `state-position` waits for this gateway to read the log that far before reading from the subgraphs'),
  STATE_CACHE_MAX_AGE_S: intFrom('STATE_CACHE_MAX_AGE_S', 1, 86_400)
    .default(600)
    .describe('no state entry is served after this many seconds, whatever the log says (`@cacheControl` hints cap it further)'),
});

export type SourcesConfig = ConfigValues<typeof sourcesConfig.shape>;
