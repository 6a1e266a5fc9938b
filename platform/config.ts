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

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** `true` or `false` read from the environment (anything else is refused naming the variable), as a boolean. */
export const boolFrom = (name: string, fallback: 'true' | 'false') =>
  z
    .enum(['true', 'false'], { message: `${name} must be true or false` })
    .default(fallback)
    .transform((v) => v === 'true');

/** A whole number read from the environment, within [min, max], with messages naming the variable. */
export const intFrom = (name: string, min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .pipe(z.number().int().min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`));

/*
 * Configuration, owned by the modules that read it: platform/ declares its section here (the database, the
 * event log, credentials, subgraph addresses), the gateway its own (gateway/config.ts), each subgraph its
 * own (subgraphs/<name>/config.ts). The sections are merged into one validated object at start
 * (gateway/config.ts, `loadConfig`), and each subgraph is handed only its slice. Every variable carries its
 * documentation (`.describe()`): the configuration table of docs/operations.md is generated from it.
 */

export type ConfigShape = Record<string, z.ZodType>;
export type ConfigValues<S extends ConfigShape> = z.infer<z.ZodObject<S>>;

export interface ConfigSection<S extends ConfigShape = ConfigShape> {
  /** Who declares it: `platform`, `gateway`, or a subgraph's name. */
  owner: string;
  /** The file that declares it (shown in the configuration table). */
  file: string;
  shape: S;
  /** Rules across its variables, each broken one a message naming them. @default none */
  check?(values: ConfigValues<S>): string[];
}

export function configSection<S extends ConfigShape>(owner: string, file: string, shape: S, check?: (values: ConfigValues<S>) => string[]): ConfigSection<S> {
  return { owner, file, shape, ...(check ? { check } : {}) };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Parses the environment against the merged shape of `sections`; a bad value, or a broken rule of a
 * section, throws a ConfigError naming the variables. An empty variable means "unset", as shells and .env
 * files commonly write it.
 */
export function parseConfig<S extends ConfigShape>(sections: readonly ConfigSection[], shape: S, env: Record<string, string | undefined>): ConfigValues<S> {
  const owners = new Map<string, string>();
  for (const section of sections) {
    for (const key of Object.keys(section.shape)) {
      const other = owners.get(key);
      if (other) throw new Error(`configuration variable ${key} is declared by both ${other} and ${section.owner}`);
      owners.set(key, section.owner);
    }
  }
  const relevant: Record<string, string> = {};
  for (const key of Object.keys(shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') relevant[key] = value;
  }
  const parsed = z.object(shape).safeParse(relevant);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`));
  }
  const values = parsed.data as Record<string, unknown>;
  const problems = sections.flatMap((section) => section.check?.(sliceOf(section, values)) ?? []);
  if (problems.length > 0) throw new ConfigError(problems);
  return parsed.data;
}

/** The values of one section's variables, out of the whole configuration. */
export function sliceOf<S extends ConfigShape>(section: ConfigSection<S>, config: Readonly<Record<string, unknown>>): ConfigValues<S> {
  return Object.fromEntries(Object.keys(section.shape).map((key) => [key, config[key]])) as ConfigValues<S>;
}

/**
 * One section's values out of the configuration a part was given, checked as the part registers: every
 * variable the section declares is there (an optional one may be unset), and the section's rules hold.
 * A part given a configuration without its section (a hand-made object, another process's slice) stops
 * the start with a ConfigError naming the part and the variables, instead of reading `undefined` later.
 */
export function sectionOf<S extends ConfigShape>(section: ConfigSection<S>, given: object, part: string): ConfigValues<S> {
  const config = given as Readonly<Record<string, unknown>>;
  const missing = Object.entries(section.shape)
    .filter(([key, type]) => config[key] === undefined && !(type instanceof z.ZodOptional))
    .map(([key]) => key);
  if (missing.length > 0) {
    throw new ConfigError([
      `${part}: its configuration has no ${missing.join(', ')} (${section.owner}'s section, ${section.file}); pass the configuration loadConfig made`,
    ]);
  }
  const values = sliceOf(section, config);
  const problems = section.check?.(values) ?? [];
  if (problems.length > 0) throw new ConfigError(problems.map((problem) => `${part}: ${problem}`));
  return values;
}

/** platform/'s section: the database, the event log, credentials and principals, subgraph addresses. */
export const platformConfig = configSection(
  'platform',
  'platform/config.ts',
  {
    DATA_DIR: z
      .string()
      .trim()
      .min(1)
      .default('./data')
      .describe('PGlite data directory when `DATABASE_URL` is unset; `:memory:` keeps state in memory; one process per directory (below)'),
    DATABASE_URL: z
      .string()
      .trim()
      .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must be a postgres:// or postgresql:// URL')
      .optional()
      .describe('`postgres://...`: use this PostgreSQL server instead of PGlite (same migrations)'),
    DATABASE_SCHEMA: z
      .string()
      .trim()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'DATABASE_SCHEMA must be a lower-case SQL identifier (a-z, 0-9, _)')
      .optional()
      .describe('PostgreSQL schema for the tables (created when missing); only with `DATABASE_URL`; unset: `public`'),
    DATABASE_QUERY_TIMEOUT_MS: intFrom('DATABASE_QUERY_TIMEOUT_MS', 100, 3_600_000)
      .default(15_000)
      .describe(
        'PostgreSQL: a statement running longer is cancelled by the server, and a query whose answer does not come 1 s after that (a stalled network, a hung server) is given up by the client; either is `SERVICE_UNAVAILABLE`, so a database that accepts connections but does not answer holds no request longer',
      ),
    EMBEDDED_READ_CACHE: boolFrom('EMBEDDED_READ_CACHE', 'true').describe(
      'PGlite: repeated reads answered from memory until the next write ([Architecture](architecture.md#architecture)); `false` runs every read',
    ),
    SUBGRAPH_URLS: z
      .string()
      .optional()
      .transform((raw, ctx) => {
        const urls: Record<string, string> = {};
        for (const part of (raw ?? '')
          .split(',')
          .map((p) => p.trim())
          .filter((p) => p.length > 0)) {
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
      })
      .describe('distributed mode: `name=url` pairs, comma-separated (`rental=http://127.0.0.1:4101/graphql`); subgraphs not listed run inside the gateway'),
    PEER_TIMEOUT_MS: intFrom('PEER_TIMEOUT_MS', 50, 60_000)
      .default(2000)
      .describe("a subgraph's call to a peer subgraph (rental asking prediction for a travel forecast) that takes longer uses the fallback (the 45 km/h rule)"),
    API_KEYS: z
      .string()
      .optional()
      .transform((raw) =>
        (raw ?? '')
          .split(',')
          .map((k) => k.trim())
          .filter((k) => k.length > 0),
      )
      .pipe(z.array(z.string().min(8, 'each API key in API_KEYS must be at least 8 characters')))
      .describe(
        'comma-separated operator keys (8+ characters each, scope `ops:admin`); with none of `API_KEYS`, `API_KEYS_FILE` and `AUTH_JWKS_URL`, demo mode',
      ),
    API_KEYS_FILE: z.string().min(1).optional().describe('JSON file of keys with their principal, tenant and scopes ([Auth](#auth))'),
    AUTH_JWKS_URL: z
      .string()
      .regex(/^https?:\/\/\S+$/, 'AUTH_JWKS_URL must be an https:// URL')
      .refine(
        (url) => url.startsWith('https://') || isLoopbackUrl(url),
        'AUTH_JWKS_URL must be https:// (plain http:// is accepted on loopback only: 127.0.0.0/8, [::1], localhost)',
      )
      .optional()
      .describe(
        'accept bearer JWTs signed by a key of this JWKS (with `AUTH_ISSUER` and `AUTH_AUDIENCE`: all three or none); the URL must be `https://` (plain `http://` only on loopback)',
      ),
    AUTH_ISSUER: z.string().min(1).optional().describe('the `iss` a bearer JWT must carry (with `AUTH_JWKS_URL` and `AUTH_AUDIENCE`)'),
    AUTH_AUDIENCE: z.string().min(1).optional().describe('the `aud` a bearer JWT must carry (with `AUTH_JWKS_URL` and `AUTH_ISSUER`)'),
    AUTH_TENANT_CLAIM: z.string().min(1).default('tenant').describe("the claim naming a token's tenant"),
    AUTH_SCOPES_CLAIM: z
      .string()
      .min(1)
      .optional()
      .describe("the claim listing a token's scopes (a space-separated string or an array); unset: `scope`, then `scp`"),
    AUTH_RECHECK_S: intFrom('AUTH_RECHECK_S', 1, 3600)
      .default(60)
      .describe(
        "seconds between checks of every open WebSocket and HTTP stream's credential (and the most the identity provider's JWKS is kept): a key gone from `API_KEYS_FILE` or a token whose signing key left the JWKS ends them",
      ),
    PRINCIPAL_SECRET: z
      .string()
      .min(32, 'PRINCIPAL_SECRET must be at least 32 characters')
      .optional()
      .describe(
        "32+ characters shared by the gateway and its subgraph servers; signs the caller's principal for each call ([Between processes](#auth)), the only credential a subgraph server is sent or reads. Required by every subgraph server and by a gateway with `SUBGRAPH_URLS` (demo mode included)",
      ),
    EVENT_REPLAY_MEMORY: intFrom('EVENT_REPLAY_MEMORY', 0, 1_000_000)
      .default(10_000)
      .describe(
        'the newest events each process keeps in memory: a subscription resumed from a cursor among them is replayed from memory, without reading the outbox or the stream (so it also works while the database is away); `0` reads every replay from the log',
      ),
    EVENT_REPLAY_MEMORY_AGE_S: intFrom('EVENT_REPLAY_MEMORY_AGE_S', 1, 86_400)
      .default(300)
      .describe(
        'seconds an event stays among those `EVENT_REPLAY_MEMORY` keeps, counted from when the process read it: what is kept reaches its steady size within this time at any event rate; a replay from further back reads the log',
      ),
    EVENT_BUS_URL: z
      .string()
      .trim()
      .regex(/^(nats|tls):\/\/\S+$/, 'EVENT_BUS_URL must be a nats:// or tls:// URL')
      .optional()
      .describe('`nats://host:4222`: relay the outbox to NATS JetStream ([event bus](#event-bus-nats-jetstream)); unset, nothing needs NATS'),
    EVENT_STREAM: z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'EVENT_STREAM must be 1-64 characters of A-Z a-z 0-9 _ -')
      .default('OPS_EVENTS')
      .describe('the JetStream stream; its subjects are `<stream>.<topic>`'),
    EVENT_STREAM_MAX_AGE_S: intFrom('EVENT_STREAM_MAX_AGE_S', 60, 365 * 86_400)
      .default(7 * 86_400)
      .describe('events older than this (7 days) leave the stream'),
    EVENT_STREAM_MAX_BYTES: intFrom('EVENT_STREAM_MAX_BYTES', 1024 * 1024, 1024 ** 4)
      .default(1024 ** 3)
      .describe("the stream's size bound (1 GiB); the oldest events leave first"),
    EVENT_STREAM_DUPLICATE_WINDOW_S: intFrom('EVENT_STREAM_DUPLICATE_WINDOW_S', 1, 86_400)
      .default(120)
      .describe("JetStream's deduplication window for a relayed event published again"),
    OUTBOX_RETENTION_S: intFrom('OUTBOX_RETENTION_S', 60, 365 * 86_400)
      .default(7 * 86_400)
      .describe(
        'seconds an outbox event is kept (7 days, as the stream), and in any case until it is relayed; high-rate topics keep less ([Retention](#retention-of-the-event-log))',
      ),
    OUTBOX_PRUNE_INTERVAL_MS: intFrom('OUTBOX_PRUNE_INTERVAL_MS', 100, 86_400_000).default(60_000).describe('how often the outbox is pruned'),
  },
  (config) => {
    const problems: string[] = [];
    const jwt = [config.AUTH_JWKS_URL, config.AUTH_ISSUER, config.AUTH_AUDIENCE];
    if (jwt.some((v) => v !== undefined) && jwt.some((v) => v === undefined)) {
      problems.push('AUTH_JWKS_URL, AUTH_ISSUER and AUTH_AUDIENCE: set all three to accept bearer JWTs, or none');
    }
    if (config.DATABASE_SCHEMA && !config.DATABASE_URL) problems.push('DATABASE_SCHEMA: needs DATABASE_URL (the embedded database has one schema)');
    return problems;
  },
);

export type PlatformConfig = ConfigValues<typeof platformConfig.shape>;

/** Demo mode: no credential configured at all, every call acts for the demo principal. */
export const isDemoMode = (config: Pick<PlatformConfig, 'API_KEYS' | 'API_KEYS_FILE' | 'AUTH_JWKS_URL'>) =>
  config.API_KEYS.length === 0 && !config.API_KEYS_FILE && !config.AUTH_JWKS_URL;
