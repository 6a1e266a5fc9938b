import { z } from 'zod';

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const intFrom = (name: string, min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .pipe(z.number().int().min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`));

/**
 * The environment, read once at start. Every variable is documented in the README.
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
  /** Lifetime of a signed quote and of its machine reservations. @default 120 */
  QUOTE_TTL_SECONDS: intFrom('QUOTE_TTL_SECONDS', 5, 3600).default(120),
  /** How often expired quotes are swept and their machines released. @default 1000 */
  QUOTE_SWEEP_INTERVAL_MS: intFrom('QUOTE_SWEEP_INTERVAL_MS', 50, 600_000).default(1000),
  /** How often a delivery in transit publishes its position (trackingUpdated). @default 2000 */
  TRACKING_TICK_MS: intFrom('TRACKING_TICK_MS', 50, 600_000).default(2000),
  /** A WebSocket that sends no connection_init within this is closed (4408). @default 3000 */
  WS_CONNECTION_INIT_TIMEOUT_MS: intFrom('WS_CONNECTION_INIT_TIMEOUT_MS', 100, 60_000).default(3000),
  /** WebSocket ping interval; a peer that misses a pong for as long is dropped. @default 12000 */
  WS_KEEPALIVE_MS: intFrom('WS_KEEPALIVE_MS', 100, 600_000).default(12_000),
  /** Bytes that may wait in one socket's send buffer before it is closed as a slow consumer (4413). @default 1048576 */
  WS_MAX_BUFFERED_BYTES: intFrom('WS_MAX_BUFFERED_BYTES', 1024, 256 * 1024 * 1024).default(1024 * 1024),
  /** Events that may wait for one subscription before its connection is closed as a slow consumer. @default 1000 */
  WS_MAX_QUEUED_EVENTS: intFrom('WS_MAX_QUEUED_EVENTS', 1, 1_000_000).default(1000),
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
  /** A run whose estimated compute time is longer is refused before it starts. @default 120 */
  OPTIMIZATION_MAX_RUN_SECONDS: intFrom('OPTIMIZATION_MAX_RUN_SECONDS', 1, 3600).default(120),
  /** Comma-separated API keys. Unset or empty: demo mode, no key needed. */
  API_KEYS: z
    .string()
    .optional()
    .transform((raw) => (raw ?? '').split(',').map((k) => k.trim()).filter((k) => k.length > 0))
    .pipe(z.array(z.string().min(8, 'each API key in API_KEYS must be at least 8 characters'))),
  /** Log level of the server log (pino levels). @default info */
  LOG_LEVEL: z.enum(logLevels).default('info'),
  /** Largest accepted request body in bytes. @default 1048576 */
  BODY_LIMIT_BYTES: intFrom('BODY_LIMIT_BYTES', 1024, 64 * 1024 * 1024).default(1024 * 1024),
  /** Ed25519 private key (JWK JSON) to sign quotes with; unset: one is generated and kept in the database. */
  QUOTE_SIGNING_KEY: z.string().trim().min(1).optional(),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

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
  if (parsed.data.DATABASE_SCHEMA && !parsed.data.DATABASE_URL) {
    throw new ConfigError(['DATABASE_SCHEMA: needs DATABASE_URL (the embedded database has one schema)']);
  }
  return parsed.data;
}
