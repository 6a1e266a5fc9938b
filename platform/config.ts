import { z } from 'zod';

/** Whether a host (a name or an address, IPv6 with or without brackets) is this machine's loopback. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare);
}

function isLoopbackUrl(url: string): boolean {
  try {
    return isLoopbackHost(new URL(url).hostname);
  } catch {
    return false;
  }
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const intFrom = (name: string, min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .pipe(z.number().int().min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`));

/**
 * The environment, read once at start. Every variable is documented in docs/operations.md ("Configuration").
 */
const envSchema = z.object({
  /** TCP port of the one HTTP server. @default 4000 */
  PORT: intFrom('PORT', 0, 65535).default(4000),
  /** Interface to bind. Demo mode has no auth, so the default stays on loopback. @default 127.0.0.1 */
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Directory of the embedded PGlite database, used when DATABASE_URL is unset. @default ./data */
  DATA_DIR: z.string().trim().min(1).default('./data'),
  /** PostgreSQL connection string; when set, replaces the embedded database. */
  DATABASE_URL: z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must be a postgres:// or postgresql:// URL')
    .optional(),
  /** PostgreSQL schema to keep the tables in (created when missing); only with DATABASE_URL. @default public */
  DATABASE_SCHEMA: z
    .string()
    .trim()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'DATABASE_SCHEMA must be a lower-case SQL identifier (a-z, 0-9, _)')
    .optional(),
  /**
   * PostgreSQL: longest a statement may run, and a query wait for its answer, before it fails as
   * SERVICE_UNAVAILABLE (a database that accepts connections but does not answer holds no request longer).
   * @default 15000
   */
  DATABASE_QUERY_TIMEOUT_MS: intFrom('DATABASE_QUERY_TIMEOUT_MS', 100, 3_600_000).default(15_000),
  /**
   * Distributed mode: subgraphs served by their own processes, as `name=url` pairs separated by commas
   * (`rental=http://127.0.0.1:4101/graphql`). Subgraphs not listed run inside the gateway's process.
   */
  SUBGRAPH_URLS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const urls: Record<string, string> = {};
      for (const part of (raw ?? '').split(',').map((p) => p.trim()).filter((p) => p.length > 0)) {
        const match = /^([a-z][a-z0-9_-]*)=(https?:\/\/\S+)$/.exec(part);
        if (!match) {
          ctx.addIssue({ code: 'custom', message: `SUBGRAPH_URLS entry "${part}" must look like name=http://host:port/graphql` });
          return z.NEVER;
        }
        const [, name, url] = match as unknown as [string, string, string];
        if (urls[name]) {
          ctx.addIssue({ code: 'custom', message: `SUBGRAPH_URLS names ${name} twice` });
          return z.NEVER;
        }
        urls[name] = url;
      }
      return urls;
    }),
  /** Time a call to a subgraph over the network may take before it counts as unavailable. @default 10000 */
  SUBGRAPH_TIMEOUT_MS: intFrom('SUBGRAPH_TIMEOUT_MS', 100, 600_000).default(10_000),
  /**
   * Time a subgraph waits for a peer subgraph's answer (rental asking prediction for a truck's travel
   * forecast) before it uses its fallback. @default 2000
   */
  PEER_TIMEOUT_MS: intFrom('PEER_TIMEOUT_MS', 50, 60_000).default(2000),
  /** Lifetime of a signed quote and of its machine reservations. @default 120 */
  QUOTE_TTL_SECONDS: intFrom('QUOTE_TTL_SECONDS', 5, 3600).default(120),
  /** How often expired quotes are swept and their machines released. @default 1000 */
  QUOTE_SWEEP_INTERVAL_MS: intFrom('QUOTE_SWEEP_INTERVAL_MS', 50, 600_000).default(1000),
  /** How often a delivery in transit publishes its position (trackingUpdated). @default 2000 */
  TRACKING_TICK_MS: intFrom('TRACKING_TICK_MS', 50, 600_000).default(2000),
  /** A WebSocket that sends no connection_init within this is closed (4408). @default 3000 */
  WS_CONNECTION_INIT_TIMEOUT_MS: intFrom('WS_CONNECTION_INIT_TIMEOUT_MS', 100, 60_000).default(3000),
  /**
   * How long a subscription whose subgraph was lost (restarted, redeployed) keeps reopening it from its last
   * event before its subscribers get UPSTREAM_UNAVAILABLE; 0 ends it at once. @default 30000
   */
  SUBSCRIPTION_RESUME_GRACE_MS: intFrom('SUBSCRIPTION_RESUME_GRACE_MS', 0, 600_000).default(30_000),
  /** The newest events each process keeps in memory to serve resumes without reading the log (0: none). */
  EVENT_REPLAY_MEMORY: intFrom('EVENT_REPLAY_MEMORY', 0, 1_000_000).default(10_000),
  /** WebSocket ping interval; a peer that misses a pong for as long is dropped. @default 12000 */
  WS_KEEPALIVE_MS: intFrom('WS_KEEPALIVE_MS', 100, 600_000).default(12_000),
  /** Bytes that may wait in one socket's send buffer before it is closed as a slow consumer (4413). @default 1048576 */
  WS_MAX_BUFFERED_BYTES: intFrom('WS_MAX_BUFFERED_BYTES', 1024, 256 * 1024 * 1024).default(1024 * 1024),
  /** Events that may wait for one subscription before its connection is closed as a slow consumer. @default 1000 */
  WS_MAX_QUEUED_EVENTS: intFrom('WS_MAX_QUEUED_EVENTS', 1, 1_000_000).default(1000),
  /** Wall-clock interval of a bonding session's link-model step. @default 1000 */
  BONDING_TICK_MS: intFrom('BONDING_TICK_MS', 20, 600_000).default(1000),
  /** Simulated seconds one link-model step advances (60: a minute of link behaviour per step). @default 60 */
  BONDING_SIM_SECONDS_PER_TICK: intFrom('BONDING_SIM_SECONDS_PER_TICK', 1, 86_400).default(60),
  /** A bonding session with no start or key generation for this long is closed. @default 3600 */
  BONDING_SESSION_TTL_SECONDS: intFrom('BONDING_SESSION_TTL_SECONDS', 10, 30 * 86_400).default(3600),
  /** Open bonding sessions one user may hold; one more is 409. @default 16 */
  BONDING_MAX_OPEN_SESSIONS_PER_USER: intFrom('BONDING_MAX_OPEN_SESSIONS_PER_USER', 1, 10_000).default(16),
  /** Seed of the simulated AIS fleet (used when the fleet is first created). @default 7 */
  FLEET_SEED: intFrom('FLEET_SEED', 0, 2_147_483_647).default(7),
  /** Vessels in the simulated fleet (when first created). @default 24 */
  FLEET_SIZE: intFrom('FLEET_SIZE', 4, 1000).default(24),
  /** How often the fleet simulation records every vessel's position (vesselPositionsChanged). @default 10000 */
  FLEET_TICK_MS: intFrom('FLEET_TICK_MS', 50, 3_600_000).default(10_000),
  /** Most qubits one quantum run may simulate (2^24 amplitudes take 256 MiB). @default 24 */
  OPTIMIZATION_MAX_QUBITS: intFrom('OPTIMIZATION_MAX_QUBITS', 4, 24).default(24),
  /** Quantum runs in progress at once, across every instance sharing the database. @default 2 */
  OPTIMIZATION_MAX_CONCURRENT_RUNS: intFrom('OPTIMIZATION_MAX_CONCURRENT_RUNS', 1, 64).default(2),
  /** Quantum runs one tenant may have in progress at once (operators are not capped by it). */
  OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT: intFrom('OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT', 1, 64).default(1),
  /** A run whose estimated compute time is longer is refused before it starts. @default 120 */
  OPTIMIZATION_MAX_RUN_SECONDS: intFrom('OPTIMIZATION_MAX_RUN_SECONDS', 1, 3600).default(120),
  /**
   * Seconds a running quantum run's lease lasts; its process renews it every third of that. A run whose
   * lease expires (its process died) is failed by the next sweep of any instance. @default 15
   */
  OPTIMIZATION_RUN_LEASE_S: intFrom('OPTIMIZATION_RUN_LEASE_S', 2, 600).default(15),
  /** Comma-separated API keys. Unset or empty: demo mode, no key needed. */
  API_KEYS: z
    .string()
    .optional()
    .transform((raw) => (raw ?? '').split(',').map((k) => k.trim()).filter((k) => k.length > 0))
    .pipe(z.array(z.string().min(8, 'each API key in API_KEYS must be at least 8 characters'))),
  /**
   * A JSON file of API keys with their principals: an array of `{ "key" | "key_sha256", "principal",
   * "tenant", "scopes": [...] }` (gateway/security/auth.ts). Raw keys are hashed when the file is read.
   */
  API_KEYS_FILE: z.string().min(1).optional(),
  /**
   * Bearer JWTs from an identity provider: its JWKS, https:// (plain http:// only on loopback, where no
   * network can alter the keys). Needs AUTH_ISSUER and AUTH_AUDIENCE.
   */
  AUTH_JWKS_URL: z
    .string()
    .regex(/^https?:\/\/\S+$/, 'AUTH_JWKS_URL must be an https:// URL')
    .refine((url) => url.startsWith('https://') || isLoopbackUrl(url), 'AUTH_JWKS_URL must be https:// (plain http:// is accepted on loopback only: 127.0.0.0/8, [::1], localhost)')
    .optional(),
  /** The `iss` a token must carry. */
  AUTH_ISSUER: z.string().min(1).optional(),
  /** The `aud` a token must carry (one of them). */
  AUTH_AUDIENCE: z.string().min(1).optional(),
  /** The claim naming a token's tenant. @default tenant */
  AUTH_TENANT_CLAIM: z.string().min(1).default('tenant'),
  /** The claim listing a token's scopes (a space-separated string or an array). @default scope, then scp */
  AUTH_SCOPES_CLAIM: z.string().min(1).optional(),
  /**
   * The secret the gateway signs the caller's principal with for its subgraphs (HMAC-SHA256, at least 32
   * characters); the gateway and every subgraph process of a distributed deployment share it. Unset: each
   * process makes its own, which is enough when the subgraphs run in the gateway's process.
   */
  PRINCIPAL_SECRET: z.string().min(32, 'PRINCIPAL_SECRET must be at least 32 characters').optional(),
  /**
   * Browser origins allowed to call the API (CORS), comma-separated exact origins such as
   * `https://app.example.com` (scheme, host and port; no path). @default none
   */
  CORS_ORIGINS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const origins = (raw ?? '').split(',').map((o) => o.trim()).filter((o) => o.length > 0);
      for (const origin of origins) {
        let parsed: URL | null = null;
        try {
          parsed = new URL(origin);
        } catch {
          parsed = null;
        }
        if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
          ctx.addIssue({ code: 'custom', message: `CORS_ORIGINS entry "${origin}" must be an exact origin such as https://app.example.com (no path, no trailing slash)` });
          return z.NEVER;
        }
      }
      return origins;
    }),
  /**
   * Per-principal rate limit of the gateway: tokens refilled per second (0: no limit). An operation costs
   * one token, a heavy one more (gateway/security/rate-limit.ts). The demo principal is not limited. @default 50
   */
  RATE_LIMIT_PER_S: intFrom('RATE_LIMIT_PER_S', 0, 1_000_000).default(50),
  /** The bucket's size: the most tokens a principal can spend at once. @default 200 */
  RATE_LIMIT_BURST: intFrom('RATE_LIMIT_BURST', 1, 1_000_000).default(200),
  /** Log level of the server log (pino levels). @default info */
  LOG_LEVEL: z.enum(logLevels).default('info'),
  /**
   * PGlite: repeated reads answered from memory until the next write to the embedded database, which has
   * no other writer (platform/read-cache.ts); `false` runs every read. @default true
   */
  EMBEDDED_READ_CACHE: z
    .enum(['true', 'false'], { message: 'EMBEDDED_READ_CACHE must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Identical subgraph reads in flight at once are made once (gateway/execution/collapse.ts); `false` makes every
   * fetch on its own (to compare, or to rule it out). @default true
   */
  GATEWAY_COLLAPSE_FETCHES: z
    .enum(['true', 'false'], { message: 'GATEWAY_COLLAPSE_FETCHES must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Query plans executed by the gateway's compiled executor (gateway/execution/plan-executor.ts); `false` runs
   * `@apollo/gateway`'s own execution (to compare, or to rule it out). @default true
   */
  GATEWAY_COMPILED_EXECUTION: z
    .enum(['true', 'false'], { message: 'GATEWAY_COMPILED_EXECUTION must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Subgraphs called in process (one-process mode) run their documents compiled once by graphql-jit
   * (gateway/execution/in-process-data-source.ts); `false` runs graphql-js's `execute`. @default true
   */
  SUBGRAPH_COMPILED_EXECUTION: z
    .enum(['true', 'false'], { message: 'SUBGRAPH_COMPILED_EXECUTION must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Memory for subgraph answers that are functions of the request alone (gateway/execution/fetch-cache.ts), in MiB;
   * 0 fetches every one. @default 64
   */
  GATEWAY_FETCH_CACHE_MB: intFrom('GATEWAY_FETCH_CACHE_MB', 0, 4096).default(64),
  /**
   * Seconds a kept answer is served before it is fetched again: how long a subgraph redeployed with other
   * models can still be answered by the old ones. @default 300
   */
  GATEWAY_FETCH_CACHE_MAX_AGE_S: intFrom('GATEWAY_FETCH_CACHE_MAX_AGE_S', 1, 86_400).default(300),
  /** Largest accepted request body in bytes. @default 1048576 */
  BODY_LIMIT_BYTES: intFrom('BODY_LIMIT_BYTES', 1024, 64 * 1024 * 1024).default(1024 * 1024),
  /** Lexical tokens a GraphQL document may have; the parser stops there. @default 1000 */
  GRAPHQL_MAX_TOKENS: intFrom('GRAPHQL_MAX_TOKENS', 50, 1_000_000).default(1000),
  /** Nesting depth of a GraphQL operation, fragments followed. @default 10 */
  GRAPHQL_MAX_DEPTH: intFrom('GRAPHQL_MAX_DEPTH', 2, 1000).default(10),
  /** Aliased fields in a GraphQL operation, fragments expanded. @default 15 */
  GRAPHQL_MAX_ALIASES: intFrom('GRAPHQL_MAX_ALIASES', 0, 100_000).default(15),
  /** Fields at the root of a GraphQL operation, fragments expanded. @default 20 */
  GRAPHQL_MAX_ROOT_FIELDS: intFrom('GRAPHQL_MAX_ROOT_FIELDS', 1, 100_000).default(20),
  /** Field selections of a GraphQL operation, fragments expanded. @default 200 */
  GRAPHQL_MAX_FIELDS: intFrom('GRAPHQL_MAX_FIELDS', 1, 1_000_000).default(200),
  /** Directives in a GraphQL document. @default 50 */
  GRAPHQL_MAX_DIRECTIVES: intFrom('GRAPHQL_MAX_DIRECTIVES', 0, 100_000).default(50),
  /** Static cost of a GraphQL operation (docs/operations.md, "Request limits"). @default 5000 */
  GRAPHQL_MAX_COST: intFrom('GRAPHQL_MAX_COST', 1, 100_000_000).default(5000),
  /** Size assumed for a list field that declares none. @default 10 */
  GRAPHQL_DEFAULT_LIST_SIZE: intFrom('GRAPHQL_DEFAULT_LIST_SIZE', 1, 100_000).default(10),
  /** Time to receive a request's headers before it is answered 408 and closed. @default 10000 */
  HTTP_HEADERS_TIMEOUT_MS: intFrom('HTTP_HEADERS_TIMEOUT_MS', 100, 600_000).default(10_000),
  /** Time to receive a whole request (headers and body) before it is answered 408 and closed. @default 30000 */
  HTTP_REQUEST_TIMEOUT_MS: intFrom('HTTP_REQUEST_TIMEOUT_MS', 100, 3_600_000).default(30_000),
  /** Subscriptions one WebSocket connection may hold at once; more are refused, the connection kept. @default 100 */
  WS_MAX_SUBSCRIPTIONS: intFrom('WS_MAX_SUBSCRIPTIONS', 1, 100_000).default(100),
  /** Ed25519 private key (JWK JSON) to sign quotes with; unset: one is generated and kept in the database. */
  QUOTE_SIGNING_KEY: z.string().trim().min(1).optional(),
  /** Seed of the features subgraph's generated insurance world. @default 20261123 */
  FEATURES_SEED: intFrom('FEATURES_SEED', 0, 2 ** 31 - 1).default(20_261_123),
  /** Policies in the generated insurance world (claims and label rows follow from them). @default 3000 */
  FEATURES_POLICIES: intFrom('FEATURES_POLICIES', 20, 200_000).default(3000),
  /**
   * Folder of the features subgraph's offline store (the generated world as Parquet files, written on first
   * use and read on later starts); `:memory:` keeps the world in memory only. @default ./features-data
   */
  FEATURES_DATA_DIR: z.string().trim().min(1).default('./features-data'),
  /** Redis for the online feature store (shared by every instance); unset: the database holds it. */
  REDIS_URL: z
    .string()
    .trim()
    .regex(/^rediss?:\/\/\S+$/, 'REDIS_URL must be a redis:// or rediss:// URL')
    .optional(),
  /**
   * NATS with JetStream for the event log (nats://host:port); unset: the outbox in the database is the only
   * event log, and nothing needs NATS.
   */
  EVENT_BUS_URL: z
    .string()
    .trim()
    .regex(/^(nats|tls):\/\/\S+$/, 'EVENT_BUS_URL must be a nats:// or tls:// URL')
    .optional(),
  /** The JetStream stream the outbox is relayed to; its subjects are `<name>.<topic>`. @default OPS_EVENTS */
  EVENT_STREAM: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'EVENT_STREAM must be 1-64 characters of A-Z a-z 0-9 _ -')
    .default('OPS_EVENTS'),
  /** Events older than this leave the stream. @default 604800 (7 days) */
  EVENT_STREAM_MAX_AGE_S: intFrom('EVENT_STREAM_MAX_AGE_S', 60, 365 * 86_400).default(7 * 86_400),
  /** Seconds an outbox event is kept (and in any case until relayed); high-rate topics keep less. */
  OUTBOX_RETENTION_S: intFrom('OUTBOX_RETENTION_S', 60, 365 * 86_400).default(7 * 86_400),
  /** How often the outbox is pruned. */
  OUTBOX_PRUNE_INTERVAL_MS: intFrom('OUTBOX_PRUNE_INTERVAL_MS', 100, 86_400_000).default(60_000),
  /** The stream's size bound; the oldest events leave first. @default 1073741824 (1 GiB) */
  EVENT_STREAM_MAX_BYTES: intFrom('EVENT_STREAM_MAX_BYTES', 1024 * 1024, 1024 ** 4).default(1024 ** 3),
  /** JetStream's deduplication window: a relayed event published again within it is stored once. @default 120 */
  EVENT_STREAM_DUPLICATE_WINDOW_S: intFrom('EVENT_STREAM_DUPLICATE_WINDOW_S', 1, 86_400).default(120),
  /** Prefix of the online store's Redis keys. @default features */
  FEATURES_REDIS_PREFIX: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_:.-]{1,64}$/, 'FEATURES_REDIS_PREFIX must be 1-64 characters of A-Z a-z 0-9 _ : . -')
    .default('features'),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Demo mode: no credential configured at all, every call acts for the demo principal. */
export const isDemoMode = (config: Pick<Config, 'API_KEYS' | 'API_KEYS_FILE' | 'AUTH_JWKS_URL'>) =>
  config.API_KEYS.length === 0 && !config.API_KEYS_FILE && !config.AUTH_JWKS_URL;

/** Parses the environment; a bad value throws a ConfigError naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const relevant: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = env[key];
    // An empty variable means "unset", as shells and .env files commonly write it.
    if (value !== undefined && value !== '') relevant[key] = value;
  }
  const parsed = envSchema.safeParse(relevant);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
    );
  }
  if (parsed.data.HTTP_HEADERS_TIMEOUT_MS > parsed.data.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)']);
  }
  const jwt = [parsed.data.AUTH_JWKS_URL, parsed.data.AUTH_ISSUER, parsed.data.AUTH_AUDIENCE];
  if (jwt.some((v) => v !== undefined) && jwt.some((v) => v === undefined)) {
    throw new ConfigError(['AUTH_JWKS_URL, AUTH_ISSUER and AUTH_AUDIENCE: set all three to accept bearer JWTs, or none']);
  }
  if (parsed.data.DATABASE_SCHEMA && !parsed.data.DATABASE_URL) {
    throw new ConfigError(['DATABASE_SCHEMA: needs DATABASE_URL (the embedded database has one schema)']);
  }
  return parsed.data;
}
