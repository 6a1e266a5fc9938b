import { RemoteGraphQLDataSource, type GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { parse, type GraphQLFormattedError } from 'graphql';
import { STATUS_CODES } from 'node:http';
import { Pool } from 'undici';
import { randomUUID } from 'node:crypto';
import { PRINCIPAL_HEADER, SYSTEM_PRINCIPAL, type Principal, type PrincipalSigner } from '../../platform/principal.js';
import { FORWARDED_HEADERS, type GatewayContext } from './context.js';
import { unavailableErrors } from './subgraph-errors.js';
import { injectTrace } from '../observability/tracing.js';

type Fetcher = RemoteGraphQLDataSource['fetcher'];

/**
 * Calls a subgraph that runs as its own server (distributed mode). The same headers travel as in process;
 * the subgraph is called with the gateway's own key (client credentials stop at the gateway). A subgraph
 * that cannot be reached, times out or fails without a GraphQL answer becomes UPSTREAM_UNAVAILABLE on the
 * fields it owns, and the rest of the query still resolves.
 */
export class RemoteDataSource extends RemoteGraphQLDataSource<GatewayContext> {
  /** Keep-alive connections to the subgraph server. */
  private readonly pool: Pool;

  constructor(
    private readonly service: string,
    url: string,
    private readonly options: { timeoutMs: number; apiKey: string | undefined; signer: PrincipalSigner | null; onFailure: (error: unknown) => void },
  ) {
    const target = new URL(url);
    const pool = new Pool(target.origin, { connections: 64, keepAliveTimeout: 30_000 });
    const path = `${target.pathname}${target.search}`;
    // The principal is signed where the body is known: the signature binds this very call.
    const sign = options.signer ? signingFor(options.signer, service, path) : null;
    super({ url, fetcher: leanFetcher(pool, path, options.timeoutMs, sign) });
    this.pool = pool;
  }

  /** Closes the kept-alive connections. */
  close(): Promise<void> {
    return this.pool.close();
  }

  override willSendRequest(options: GraphQLDataSourceProcessOptions<GatewayContext>): void {
    const headers = options.request.http?.headers;
    if (!headers) return;
    const fromClient = 'incomingRequestContext' in options;
    const incoming = fromClient ? options.context.headers : {};
    for (const name of FORWARDED_HEADERS) {
      const value = incoming[name];
      if (value !== undefined) headers.set(name, value);
    }
    headers.set('x-request-id', incoming['x-request-id'] ?? randomUUID());
    // The caller's principal (health checks act as the system), signed by the fetcher over the body it sends.
    if (this.options.signer) headers.set(UNSIGNED_PRINCIPAL, JSON.stringify(fromClient ? options.context.principal : SYSTEM_PRINCIPAL));
    if (this.options.apiKey) headers.set('x-api-key', this.options.apiKey);
    // The trace goes on to the subgraph server (a no-op unless tracing is on).
    injectTrace(headers);
  }

  override async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    try {
      return await super.process(options);
    } catch (error) {
      // A GraphQL answer with a non-2xx status (variables that do not coerce: 400) is still an answer.
      const body = (error as { extensions?: { response?: { status?: number; body?: unknown } } }).extensions?.response;
      const errors = isGraphQLBody(body?.body) ? body.body.errors : undefined;
      if (errors && errors.length > 0 && (body?.status ?? 500) < 500) return { errors };
      this.options.onFailure(error);
      return { errors: unavailableErrors(this.service, parse(options.request.query ?? '{ __typename }'), options.request.variables ?? {}) };
    }
  }
}

/**
 * The fetch the data source calls, on undici's request API: the same contract for the library (status,
 * headers, a JSON or text body), with less work per request than the global fetch (no web streams, no
 * Request or Response objects); the body is read as one buffer. Each request is given up after `timeoutMs`.
 */
function leanFetcher(
  pool: Pool,
  path: string,
  timeoutMs: number,
  sign: ((headers: Record<string, string>, method: string, body: string) => void) | null,
): Fetcher {
  const fetcher = async (url: string, init?: { method?: string; headers?: Record<string, string>; body?: string }) => {
    const headers = { ...(init?.headers ?? {}) };
    sign?.(headers, init?.method ?? 'POST', init?.body ?? '');
    const answer = await pool.request({
      method: init?.method ?? 'POST',
      path,
      headers,
      body: init?.body ?? null,
      signal: AbortSignal.timeout(timeoutMs),
    });
    return new LeanResponse(url, answer.statusCode, answer.headers, await answer.body.text());
  };
  return fetcher as unknown as Fetcher;
}

/** Where `willSendRequest` leaves the principal for the fetcher to sign; never sent. */
const UNSIGNED_PRINCIPAL = 'x-ops-principal-unsigned';

/** Replaces the unsigned principal with its signature over this call (subgraph, method, path, body). */
function signingFor(signer: PrincipalSigner, subgraph: string, path: string) {
  return (headers: Record<string, string>, method: string, body: string) => {
    const unsigned = headers[UNSIGNED_PRINCIPAL];
    delete headers[UNSIGNED_PRINCIPAL];
    if (unsigned === undefined) return;
    headers[PRINCIPAL_HEADER] = signer.sign(JSON.parse(unsigned) as Principal, { subgraph, method, path, body });
  };
}

/** What the data source reads of an answer; its methods live on the prototype, so a copy of a result skips them. */
class LeanResponse {
  readonly ok: boolean;
  readonly statusText: string;
  readonly headers: { get(name: string): string | null };

  constructor(
    readonly url: string,
    readonly status: number,
    raw: Record<string, string | string[] | undefined>,
    private readonly body: string,
  ) {
    this.ok = status >= 200 && status <= 299;
    this.statusText = STATUS_CODES[status] ?? '';
    this.headers = new LeanHeaders(raw);
  }

  text(): Promise<string> {
    return Promise.resolve(this.body);
  }

  json(): Promise<unknown> {
    return Promise.resolve(JSON.parse(this.body) as unknown);
  }
}

class LeanHeaders {
  constructor(private readonly raw: Record<string, string | string[] | undefined>) {}

  get(name: string): string | null {
    const value = this.raw[name.toLowerCase()];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
  }
}

function isGraphQLBody(value: unknown): value is { errors: GraphQLFormattedError[] } {
  return typeof value === 'object' && value !== null && Array.isArray((value as { errors?: unknown }).errors);
}
