/**
 * Database outages, classified once. Each driver call of `platform/db.ts` turns an error that means "the
 * database cannot be reached" into a DatabaseUnavailableError; everything above (resolvers, the REST
 * engine, the gateway's and the subgraph server's error formatting) only has to recognise that one class.
 */

/** Seconds a client is asked to wait (`Retry-After`) before retrying a request refused by an outage. */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/** What a caller reads: no connection string, no driver internals. */
export const DATABASE_UNAVAILABLE_MESSAGE = 'The database cannot be reached; retry later';

/**
 * The database is down, unreachable, shutting down, or the embedded engine is closed. It carries
 * `extensions.code` as a GraphQL error does, so graphql-js keeps the code on the field error it wraps
 * around it; the driver's own error stays in `cause`, for the log only.
 */
export class DatabaseUnavailableError extends Error {
  readonly extensions = { code: 'SERVICE_UNAVAILABLE' } as const;

  constructor(cause: unknown) {
    super(DATABASE_UNAVAILABLE_MESSAGE, { cause });
    this.name = 'DatabaseUnavailableError';
  }
}

/** True for a DatabaseUnavailableError, also when wrapped (a GraphQL error's `originalError`, a `cause`). */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    if (e instanceof DatabaseUnavailableError) return true;
    e = (e as { originalError?: unknown }).originalError;
  }
  return false;
}

/** Node socket errors of a connection that cannot be made or was lost. */
const SOCKET_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection closed',
  ETIMEDOUT: 'connection timed out',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host down',
};

/**
 * SQLSTATEs meaning the server cannot serve this connection now, besides class 08 (connection exception)
 * and class 53 (insufficient resources: too many clients, out of memory, disk full, a configuration limit).
 */
const SERVER_STATES: Readonly<Record<string, string>> = {
  '57P01': 'the server terminated the connection (admin shutdown)',
  '57P02': 'the server crashed (crash shutdown)',
  '57P03': 'the server is not accepting connections (starting up or shutting down)',
  '57P04': 'the database was dropped',
  '57P05': 'the server closed an idle session',
  '57014': 'the statement ran past DATABASE_QUERY_TIMEOUT_MS',
};

const RESOURCE_STATES: Readonly<Record<string, string>> = {
  '53300': 'the server has too many connections',
  '53100': 'the server is out of disk space',
  '53200': 'the server is out of memory',
  '53400': 'a server configuration limit was reached',
};

/**
 * 55000 (object not in prerequisite state) is an outage only when the server raised it while admitting the
 * connection: the database does not accept connections (ALTER DATABASE ... ALLOW_CONNECTIONS false). Raised
 * anywhere else it is a fault of the statement, and stays one.
 */
const REFUSING_ROUTINES: ReadonlySet<string> = new Set(['CheckMyDatabase', 'InitPostgres']);

/** Messages of node-postgres and pg-pool, and of PGlite, that carry no code. */
const DRIVER_MESSAGES: readonly [RegExp, string][] = [
  [/^Connection terminated due to connection timeout/, 'connection timed out'],
  [/^Query read timeout/, 'the database did not answer in time'],
  [/^timeout exceeded when trying to connect/, 'timed out waiting for a database connection'],
  [/^Connection terminated/, 'connection closed'],
  [/is not queryable/, 'connection lost'],
  [/^Cannot use a pool after calling end on the pool/, 'the connection pool is closed'],
  [/^PGlite is closed/, 'the embedded database is closed'],
  [/^PGlite is closing/, 'the embedded database is closing'],
];

/**
 * Why the database cannot be reached, in a few words (`connection refused`), or null when `error` is not
 * a connectivity failure (a constraint violation, a syntax error, a domain error).
 */
export function connectivityFailure(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  if (error instanceof DatabaseUnavailableError) return connectivityFailure(error.cause) ?? 'database unavailable';
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (Object.hasOwn(SOCKET_ERRORS, code)) return SOCKET_ERRORS[code]!;
    if (Object.hasOwn(SERVER_STATES, code)) return SERVER_STATES[code]!;
    if (/^08[0-9A-Z]{3}$/.test(code)) return 'connection exception';
    if (/^53[0-9A-Z]{3}$/.test(code)) return RESOURCE_STATES[code] ?? 'the server is out of resources';
    if (code === '55000' && REFUSING_ROUTINES.has(String((error as { routine?: unknown }).routine))) return 'the database does not accept connections';
  }
  // Node's happy-eyeballs connect gives an AggregateError of one error per address tried.
  if (error instanceof AggregateError) {
    for (const inner of error.errors) {
      const reason = connectivityFailure(inner);
      if (reason) return reason;
    }
  }
  // The embedded engine aborted (a WebAssembly.RuntimeError): every later call fails the same way.
  if (error instanceof Error && error.name === 'RuntimeError') return 'the embedded database stopped';
  const message = (error as { message?: unknown }).message;
  if (typeof message === 'string') for (const [pattern, reason] of DRIVER_MESSAGES) if (pattern.test(message)) return reason;
  return null;
}

/** `error` as a DatabaseUnavailableError when it is a connectivity failure; otherwise unchanged. */
export function classifyDatabaseError(error: unknown): unknown {
  if (error instanceof DatabaseUnavailableError) return error;
  return connectivityFailure(error) ? new DatabaseUnavailableError(error) : error;
}

/** Runs a driver call, rethrowing a connectivity failure as a DatabaseUnavailableError. */
export async function guarded<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw classifyDatabaseError(error);
  }
}

const SECRET_PARAM = /pass|secret|token|key/i;

/** A connection string fit for a log or an error message: the password and secret parameters as `***`. */
export function redactDatabaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return '(an unparsable URL)';
  }
  if (url.password) url.password = '***';
  for (const name of [...url.searchParams.keys()]) if (SECRET_PARAM.test(name)) url.searchParams.set(name, '***');
  return url.href.replace(/%2A%2A%2A/g, '***');
}
