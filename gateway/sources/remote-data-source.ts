import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { GraphQLError, parse, type GraphQLFormattedError } from 'graphql';
import { STATUS_CODES } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Dispatcher, Pool } from 'undici';
import { PRINCIPAL_HEADER, SYSTEM_PRINCIPAL, type PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphTrust } from '../../platform/subgraph-trust.js';
import { parseCacheControlHeader } from '../planner/apollo-seam.js';
import { FORWARDED_HEADERS, type GatewayContext } from '../pipeline/context.js';
import { unavailableErrors } from './subgraph-errors.js';
import { injectTrace } from '../observability/tracing.js';

/** undici loads with the first subgraph served elsewhere: a gateway whose subgraphs all run in process does not pay for it. */
const require = createRequire(import.meta.url);

export interface RemoteDataSourceOptions {
  /** A call not answered whole this long after it was made is given up (the subgraph counts as unavailable). */
  timeoutMs: number;
  /** Signs the caller's principal over each call: the only credential a subgraph server is sent. */
  signer: PrincipalSigner;
  /** Whether the subgraph server refuses unsigned calls: one that does not is never called. */
  trust: SubgraphTrust;
  onFailure: (error: unknown) => void;
}

/**
 * Calls a subgraph that runs as its own server (distributed mode). The same headers travel as in process;
 * no credential does (client credentials stop at the gateway, and the gateway sends none of its own): the
 * caller's principal signed over this very call is all a subgraph server is sent. A server that answered
 * an unsigned call (platform/subgraph-trust.ts) is not called. A subgraph that cannot be reached, is not
 * trusted, times out or fails without a GraphQL answer becomes UPSTREAM_UNAVAILABLE on the fields it owns,
 * and the rest of the query still resolves.
 *
 * It answers what `@apollo/gateway`'s RemoteGraphQLDataSource answers (the same request body, a JSON or
 * GraphQL-response body read as the answer, a non-2xx status an error unless it carries GraphQL errors, the
 * subgraph's Cache-Control restricting the operation's cache policy), with less work per call: headers as a
 * plain object instead of node-fetch's Headers and Request, undici's dispatcher called directly (no
 * response stream: the body is collected as it arrives), and one timer for all calls in flight instead of
 * an `AbortSignal.timeout` each.
 */
export class RemoteDataSource implements GraphQLDataSource<GatewayContext> {
  /** Keep-alive connections to the subgraph server. */
  private readonly pool: Pool;
  private readonly path: string;
  private readonly calls: CallDeadlines;

  constructor(
    private readonly service: string,
    private readonly url: string,
    private readonly options: RemoteDataSourceOptions,
  ) {
    const target = new URL(url);
    const { Pool: UndiciPool } = require('undici') as typeof import('undici');
    this.pool = new UndiciPool(target.origin, { connections: 64, keepAliveTimeout: 30_000 });
    this.path = `${target.pathname}${target.search}`;
    this.calls = new CallDeadlines(options.timeoutMs, (ms) => new Error(`subgraph ${service} did not answer within ${ms} ms`));
  }

  /** Closes the kept-alive connections. */
  close(): Promise<void> {
    return this.pool.close();
  }

  async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    const { request } = options;
    if (!request.query) throw new Error('Missing query');
    const { http, ...sent } = request;
    const body = JSON.stringify(sent);
    try {
      if (!this.options.trust.trusted(this.service)) await this.options.trust.routable(this.service);
      const answer = await this.send(this.headersFor(options, http?.headers, body), body);
      const read = readBody(answer);
      if (answer.status < 200 || answer.status > 299) {
        // A GraphQL answer with a non-2xx status (variables that do not coerce: 400) is still an answer.
        if (isGraphQLBody(read) && read.errors.length > 0 && answer.status < 500) return { errors: read.errors };
        throw statusError(this.url, answer, read);
      }
      if (typeof read !== 'object' || read === null) throw new Error(`Expected JSON response body, but received: ${String(read)}`);
      const response = read as GatewayGraphQLResponse;
      restrictCachePolicy(options, header(answer.headers['cache-control']));
      return response;
    } catch (error) {
      this.options.onFailure(error);
      return { errors: unavailableErrors(this.service, parse(request.query), request.variables ?? {}) };
    }
  }

  /**
   * What travels with the call: the caller's own (usage traces ask subgraphs for theirs), the forwarded
   * request headers, a request id, the caller's principal signed over this call (health checks act as the
   * system) and the trace context.
   */
  private headersFor(options: GraphQLDataSourceProcessOptions<GatewayContext>, given: Iterable<[string, string]> | undefined, body: string) {
    const headers: Record<string, string> = {};
    if (given) for (const [name, value] of given) headers[name.toLowerCase()] = value;
    // No credential leaves the gateway, whatever a plugin put in the request.
    delete headers['authorization'];
    delete headers['x-api-key'];
    delete headers['cookie'];
    headers['content-type'] = 'application/json';
    const fromClient = 'incomingRequestContext' in options;
    const incoming = fromClient ? options.context.headers : {};
    for (const name of FORWARDED_HEADERS) {
      const value = incoming[name];
      if (value !== undefined) headers[name] = value;
    }
    headers['x-request-id'] = incoming['x-request-id'] ?? randomUUID();
    const principal = fromClient ? options.context.principal : SYSTEM_PRINCIPAL;
    headers[PRINCIPAL_HEADER] = this.options.signer.sign(principal, {
      subgraph: this.service,
      method: 'POST',
      path: this.path,
      body,
      idempotencyKey: headers['idempotency-key'],
    });
    // The trace goes on to the subgraph server (a no-op unless tracing is on).
    injectTrace({ set: (name, value) => (headers[name.toLowerCase()] = value) });
    return headers;
  }

  private send(headers: Record<string, string>, body: string): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const call = new SubgraphCall(this.calls, resolve, reject);
      this.calls.add(call);
      this.pool.dispatch({ method: 'POST', path: this.path, headers, body }, call);
    });
  }
}

/** A subgraph's answer as it arrived. */
interface Answer {
  status: number;
  statusText: string;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** The body as the data source reads it: JSON (or GraphQL-response JSON) parsed, anything else as text. */
function readBody(answer: Answer): unknown {
  const type = header(answer.headers['content-type']);
  const json = type !== null && (type.startsWith('application/json') || type.startsWith('application/graphql-response+json'));
  return json ? (JSON.parse(answer.text) as unknown) : answer.text;
}

/** A failed status as RemoteGraphQLDataSource words it (`500: Internal Server Error`, the answer in its extensions). */
function statusError(url: string, answer: Answer, body: unknown): GraphQLError {
  const code = answer.status === 401 ? 'UNAUTHENTICATED' : answer.status === 403 ? 'FORBIDDEN' : undefined;
  return new GraphQLError(`${answer.status}: ${answer.statusText}`, {
    extensions: { response: { url, status: answer.status, statusText: answer.statusText, body }, ...(code ? { code } : {}) },
  });
}

/** The subgraph's Cache-Control restricts the operation's cache policy, as `@apollo/gateway` lets it. */
function restrictCachePolicy(options: GraphQLDataSourceProcessOptions<GatewayContext>, cacheControl: string | null): void {
  if (!('incomingRequestContext' in options)) return;
  // Apollo Server's CachePolicy (the interface types it `any`).
  const policy = options.incomingRequestContext.overallCachePolicy as
    { restrict?: (hint: { maxAge: number; scope?: 'PUBLIC' | 'PRIVATE' }) => void } | undefined;
  if (typeof policy?.restrict !== 'function') return;
  const parsed = parseCacheControlHeader(cacheControl);
  const maxAge = parsed['max-age'];
  policy.restrict({
    maxAge: typeof maxAge === 'string' && /^[0-9]+$/.test(maxAge) ? Number(maxAge) : 0,
    ...(parsed['private'] === true ? { scope: 'PRIVATE' as const } : {}),
    ...(parsed['public'] === true ? { scope: 'PUBLIC' as const } : {}),
  });
}

function header(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
}

function isGraphQLBody(value: unknown): value is { errors: GraphQLFormattedError[] } {
  return typeof value === 'object' && value !== null && Array.isArray((value as { errors?: unknown }).errors);
}

/**
 * One call on the dispatcher: the answer's status, headers and body collected as they arrive, settled once
 * (answered, failed, or given up at its deadline, whichever comes first).
 */
class SubgraphCall implements Dispatcher.DispatchHandler {
  /** When the call is given up (performance.now() milliseconds); set by CallDeadlines. */
  deadline = 0;
  private controller: Dispatcher.DispatchController | null = null;
  private settled: Error | true | null = null;
  private status = 0;
  private statusText = '';
  private headers: Record<string, string | string[] | undefined> = {};
  private chunks: Buffer[] = [];

  constructor(
    private readonly deadlines: CallDeadlines,
    private readonly resolve: (answer: Answer) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Given up while it waited for a connection: it is not sent.
    if (this.settled instanceof Error) controller.abort(this.settled);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    // Informational answers (1xx) come before the answer.
    if (statusCode < 200) return;
    this.status = statusCode;
    this.statusText = statusMessage || (STATUS_CODES[statusCode] ?? '');
    this.headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.settled) return;
    this.settled = true;
    this.deadlines.delete(this);
    const text = this.chunks.length === 1 ? this.chunks[0]!.toString('utf8') : Buffer.concat(this.chunks).toString('utf8');
    this.chunks = [];
    this.resolve({ status: this.status, statusText: this.statusText, headers: this.headers, text });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.deadlines.delete(this);
    this.reject(error);
  }

  /** The deadline passed: the caller hears of it now; a call still waiting for a connection will not be sent. */
  expire(error: Error): void {
    if (this.settled) return;
    this.settled = error;
    this.reject(error);
  }

  /** Aborts the request of a call given up, if it was sent (its connection is closed). */
  abortSent(): void {
    if (this.settled instanceof Error) this.controller?.abort(this.settled);
  }
}

/**
 * The deadlines of the calls in flight, kept by one timer. Every call has the same timeout, so the calls
 * expire in the order they were made: the timer waits for the oldest call's deadline, and when it fires
 * gives up every call past its own and waits again for the oldest left. A call that ends leaves the set.
 */
const SWEEP_SLACK_MS = 2;

class CallDeadlines {
  private readonly calls = new Set<SubgraphCall>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly timeoutMs: number,
    private readonly timeoutError: (ms: number) => Error,
  ) {}

  add(call: SubgraphCall): void {
    call.deadline = performance.now() + this.timeoutMs;
    this.calls.add(call);
    if (!this.timer) this.arm(this.timeoutMs);
  }

  delete(call: SubgraphCall): void {
    this.calls.delete(call);
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.sweep(), ms);
    // In-flight calls do not keep the process alive on their own (as `AbortSignal.timeout` did not).
    this.timer.unref();
  }

  private sweep(): void {
    this.timer = null;
    const now = performance.now();
    const expired: SubgraphCall[] = [];
    for (const call of this.calls) {
      // Calls due within a timer's granularity go in this sweep rather than a timer of their own.
      if (call.deadline > now + SWEEP_SLACK_MS) {
        this.arm(call.deadline - now);
        break;
      }
      this.calls.delete(call);
      call.expire(this.timeoutError(this.timeoutMs));
      expired.push(call);
    }
    // Aborted only once all are marked: an abort frees a connection at once, and a call waiting for one
    // must already know it was given up when it gets it.
    for (const call of expired) call.abortSent();
  }
}
