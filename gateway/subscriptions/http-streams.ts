import { closeBeforeDrain } from '../http/app.js';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sectionOf } from '../../platform/config.js';
import { subscriptionsConfig, type SubscriptionsConfig } from './config.js';
import { getOperationAST, GraphQLError, OperationTypeNode, type ExecutionResult } from 'graphql';
import { isEventCursor } from '../../platform/event-hub.js';
import { statusOf } from '../../platform/errors.js';
import { principalKey, type GatewayContext } from '../pipeline/context.js';
import type { Principal } from '../../platform/principal.js';
import { revocationOf, type Authenticator } from '../security/auth.js';
import { admitOperation, type OperationGate } from './admission.js';
import { cursorOf, SlowSubscriberError, type SubscriptionExecutor } from './executor.js';
import { multipartTransport } from './multipart.js';
import { sseTransport } from './sse.js';
import type { StreamTransport, StreamWriter } from './stream-transport.js';
import type { SocketExecution } from './ws-server.js';

/*
 * Subscriptions (and other operations) streamed over plain HTTP on /graphql, for clients behind proxies
 * that block WebSockets, with the rules graphql-ws has: the request limits and trusted documents (checked
 * by the route before this), the same admission (gateway/subscriptions/admission.ts: validation,
 * authorization, the rate limit), a cap per principal, shared upstream streams with resumable cursors, the
 * credential checked again and ended with the stream, and slow consumers cut off. Each transport says how
 * a request asks for it and how results are written: Server-Sent Events (./sse.ts) and Apollo's multipart
 * subscriptions (./multipart.ts).
 *
 * A consumer that stops reading (its send buffer over WS_MAX_BUFFERED_BYTES, or its event queue full) has
 * its response cut; it reconnects and resumes from its last cursor.
 */

/** The transports, in the order an Accept header that allows several is served. */
const TRANSPORTS = { sse: sseTransport, multipart: multipartTransport } satisfies Record<string, StreamTransport>;

export type StreamProtocol = keyof typeof TRANSPORTS;
const BY_PREFERENCE = Object.entries(TRANSPORTS) as Array<[StreamProtocol, StreamTransport]>;

export interface HttpStreamsOptions {
  gate: OperationGate;
  subscriptions: SubscriptionExecutor;
  /** Runs a query or mutation sent as an event stream (one result, or deferred payloads after it). */
  execute: SocketExecution;
  maxBufferedBytes: number;
  /** Streams one principal may have open at once over HTTP. */
  maxPerPrincipal: number;
  heartbeatMs: number;
}

interface Open {
  response: ServerResponse;
  end(): void;
  /** The credential the stream was opened with, and whom it named (checked again by `recheck`). */
  credentials: { 'x-api-key'?: string | string[] | undefined; authorization?: string | undefined };
  principal: Principal;
  /** Ends the stream with a last error saying why (its credential is no longer valid). */
  revoke(reason: string): void;
}

type StreamOperation = { query: string; operationName: string | null; variables: Record<string, unknown> | null };
type Source = AsyncIterator<ExecutionResult | Record<string, unknown>>;

export class HttpStreams {
  private readonly open = new Set<Open>();
  private readonly perPrincipal = new Map<string, number>();
  private slowCuts = 0;
  private written = 0;

  constructor(private readonly options: HttpStreamsOptions) {}

  /** Results written to streams since start (each event of a subscription, each answer of a query). */
  get delivered(): number {
    return this.written;
  }

  /** Streams open now. */
  get count(): number {
    return this.open.size;
  }

  /** Responses cut as slow consumers since start. */
  get slowConsumerCloses(): number {
    return this.slowCuts;
  }

  /** Whether an Accept header asks for a stream (any transport): /graphql does not answer it 406. */
  acceptsStream(accept: string | undefined): boolean {
    return this.protocolOf(accept, true) !== null;
  }

  /**
   * The transport a request asks for: SSE for any operation, multipart only for a subscription (other
   * operations with that Accept are ordinary requests); null for an ordinary request.
   */
  protocolOf(accept: string | undefined, subscription: boolean): StreamProtocol | null {
    if (!accept) return null;
    const types = accept.split(',').map((part) => part.split(';').map((p) => p.trim().toLowerCase()));
    for (const [protocol, transport] of BY_PREFERENCE) if (transport.accepts(types, subscription)) return protocol;
    return null;
  }

  /**
   * Starts one streamed operation (the reply hijacked), or answers why it cannot start. `context` carries
   * what the route took in (gateway/pipeline/pipeline.ts: document resolution and the limits).
   */
  async serve(
    request: FastifyRequest,
    reply: FastifyReply,
    protocol: StreamProtocol,
    context: GatewayContext,
    operation: StreamOperation,
  ): Promise<FastifyReply> {
    const transport = TRANSPORTS[protocol];
    const resumeFrom = transport.resumeFrom(request.headers);
    if (resumeFrom !== undefined && (typeof resumeFrom !== 'string' || !isEventCursor(resumeFrom))) {
      return refuseWith(reply, [
        new GraphQLError('Last-Event-ID must be the cursor of an event this stream sent (its `id`: decimal digits)', { extensions: { code: 'BAD_REQUEST' } }),
      ]);
    }
    const admitted = this.admit(request, reply, context, operation);
    if ('errors' in admitted) return refuseWith(reply, admitted.errors);
    const release = this.hold(context.principal);
    if ('errors' in release) return refuseWith(reply, release.errors);
    // Set once the response is taken: a subscriber's queue overflowing cuts it.
    const slow = { cut: (): void => undefined };
    let source: Source;
    try {
      const opened = await this.source(admitted, context, resumeFrom, () => slow.cut());
      if ('errors' in opened) {
        release.release();
        return refuseWith(reply, opened.errors);
      }
      source = opened.source;
    } catch (error) {
      release.release();
      throw error;
    }
    return this.stream(request, reply, transport, { source, principal: context.principal, release: release.release, slow });
  }

  /** The operation admitted (a mutation is never sent by GET), or the errors that refuse it. */
  private admit(request: FastifyRequest, reply: FastifyReply, context: GatewayContext, operation: StreamOperation) {
    // A GET changes nothing (a page of another site can make a browser send one): mutations are POSTed.
    if (
      request.method === 'GET' &&
      context.intake &&
      getOperationAST(context.intake.document, operation.operationName)?.operation === OperationTypeNode.MUTATION
    ) {
      void reply.header('allow', 'POST');
      return { errors: [new GraphQLError('A mutation is sent with POST, not GET', { extensions: { code: 'METHOD_NOT_ALLOWED' } })] };
    }
    return admitOperation(this.options.gate, {
      context,
      operationName: operation.operationName,
      variables: operation.variables,
      headers: { set: (name, value) => void reply.header(name, value) },
    });
  }

  /**
   * A place among the principal's streams, taken before anything is awaited (so concurrent requests cannot
   * pass the cap), with its release; or the error that says the principal holds as many as it may.
   */
  private hold(principal: Principal): { release: () => void } | { errors: GraphQLError[] } {
    const key = principalKey(principal);
    const held = this.perPrincipal.get(key) ?? 0;
    const max = this.options.maxPerPrincipal;
    if (held >= max) {
      return {
        errors: [
          new GraphQLError(
            `Principal ${principal.id} already has ${held} streams open over HTTP; the limit is ${max} (HTTP_MAX_STREAMS_PER_PRINCIPAL): end one first`,
            { extensions: { code: 'SUBSCRIPTION_LIMIT_EXCEEDED', limit: { name: 'http_streams', max } } },
          ),
        ],
      };
    }
    this.perPrincipal.set(key, held + 1);
    return {
      release: () => {
        const left = (this.perPrincipal.get(key) ?? 1) - 1;
        if (left > 0) this.perPrincipal.set(key, left);
        else this.perPrincipal.delete(key);
      },
    };
  }

  /** The results to stream: the subscription's events (resumed after a cursor), or the operation's payloads. */
  private async source(
    admitted: Extract<ReturnType<typeof admitOperation>, { document: unknown }>,
    context: GatewayContext,
    after: string | undefined,
    onSlow: () => void,
  ): Promise<{ source: Source } | { errors: readonly GraphQLError[] }> {
    if (admitted.subscription) {
      const result = await this.options.subscriptions.subscribe({
        document: admitted.document,
        operationName: admitted.operationName,
        variables: admitted.variables,
        context,
        onSlow,
        ...(after !== undefined ? { after } : {}),
      });
      return Symbol.asyncIterator in result ? { source: result } : { errors: result.errors ?? [] };
    }
    const result = await this.options.execute(admitted.text, admitted.variables, admitted.operationName ?? undefined, context);
    return { source: Symbol.asyncIterator in result ? result : once(result) };
  }

  /**
   * Takes the response and writes the source's results on it with `transport`: heartbeats, the end of
   * the credential (a JWT's `exp`) and of the client, slow consumers cut, the principal's place released.
   */
  private stream(
    request: FastifyRequest,
    reply: FastifyReply,
    transport: StreamTransport,
    streamed: { source: Source; principal: Principal; release: () => void; slow: { cut: () => void } },
  ): FastifyReply {
    const { source, principal } = streamed;
    const response = reply.raw;
    const headers = { ...reply.getHeaders(), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
    void reply.hijack();
    const writer = transport.open(response, headers);
    const heartbeat = setInterval(() => writer.heartbeat(), this.options.heartbeatMs);
    let done = false;
    const endWith = (message: string) => {
      if (done) return;
      writer.failed([{ message, extensions: { code: 'UNAUTHENTICATED' } }]);
      finish(false);
    };
    const expiry = expiryTimer(request.credentialExpiresAt, () =>
      endWith('The credential of this stream expired: open it again with a fresh one and resume from the last cursor'),
    );
    const entry: Open = {
      response,
      end: () => finish(false),
      credentials: { 'x-api-key': request.headers['x-api-key'], authorization: request.headers.authorization },
      principal,
      revoke: (reason) => endWith(`The credential of this stream is no longer valid (${reason}): open it again with a valid one`),
    };
    this.open.add(entry);
    const finish = (slow: boolean) => {
      if (done) return;
      done = true;
      clearInterval(heartbeat);
      clearTimeout(expiry);
      this.open.delete(entry);
      streamed.release();
      void source.return?.();
      if (slow) {
        this.slowCuts++;
        response.destroy();
      } else if (!response.destroyed) writer.end();
    };
    streamed.slow.cut = () => finish(true);
    // The response's close is the client going (the request's fired when its body was read).
    response.on('close', () => finish(false));
    void this.pump(source, response, writer, () => done, finish).catch((error: unknown) => {
      finish(error instanceof SlowSubscriberError);
      if (!(error instanceof SlowSubscriberError)) request.log.error({ err: error }, 'event stream failed');
    });
    return reply;
  }

  /** Writes each result as it comes, until the source ends, the stream is done, or the client stops reading. */
  private async pump(source: Source, response: ServerResponse, writer: StreamWriter, done: () => boolean, finish: (slow: boolean) => void): Promise<void> {
    for (;;) {
      const item = await source.next();
      if (done() || item.done) break;
      if (response.writableLength > this.options.maxBufferedBytes) {
        finish(true);
        return;
      }
      writer.next(item.value, cursorOf(item.value));
      this.written++;
    }
    finish(false);
  }

  /**
   * Authenticates every open stream's credential again (a key gone from the keys file, a token whose signing
   * key left the JWKS): one that no longer names its principal ends with a last UNAUTHENTICATED error.
   */
  async recheck(auth: Authenticator): Promise<number> {
    let ended = 0;
    await Promise.all(
      [...this.open].map(async (open) => {
        const reason = await revocationOf(auth, open.credentials, open.principal);
        if (reason === null) return;
        ended++;
        open.revoke(reason);
      }),
    );
    return ended;
  }

  /** Ends every open stream (shutdown): clients reconnect elsewhere and resume from their last cursor. */
  close(): void {
    for (const open of [...this.open]) open.end();
  }
}

/**
 * A stream opened with a credential that ends (a JWT) ends with it, as a WebSocket does: a last error
 * saying why, then the stream's end. The client opens another with a fresh token and resumes.
 */
function expiryTimer(expiresAt: number | null, expire: () => void): NodeJS.Timeout | undefined {
  if (expiresAt === null) return undefined;
  const timer = setTimeout(expire, Math.max(0, expiresAt - Date.now()));
  timer.unref();
  return timer;
}

/** Errors before a stream starts: a GraphQL-shaped JSON answer with the first error's catalogue status. */
function refuseWith(reply: FastifyReply, errors: readonly GraphQLError[]): FastifyReply {
  const code = errors[0]?.extensions['code'];
  return reply
    .code(errors.length > 0 ? statusOf(code) : 500)
    .type('application/json; charset=utf-8')
    .send({ errors: errors.map((e) => e.toJSON()) });
}

function once<T>(value: T): AsyncIterator<T> {
  let given = false;
  return {
    async next() {
      if (given) return { done: true, value: undefined };
      given = true;
      return { done: false, value };
    },
  };
}

export interface HttpStreamsPluginOptions {
  config: SubscriptionsConfig;
  /** The schema served now, and what runs a query or mutation streamed (gateway/graphql/apollo.ts). */
  schema: OperationGate['schema'];
  /** Federated subscriptions (made from the supergraph, gateway/graphql/supergraph.ts). */
  subscriptions: SubscriptionExecutor;
  execute: SocketExecution;
}

/**
 * The `http-streams` part: subscriptions and operations streamed over HTTP (`app.httpStreams`), ended
 * before the server closes (it waits for its connections), with their gauges.
 */
export const httpStreamsPlugin = fp(
  async (app: FastifyInstance, options: HttpStreamsPluginOptions) => {
    const config = sectionOf(subscriptionsConfig, options.config, 'http-streams');
    const streams = new HttpStreams({
      gate: { schema: options.schema, pipeline: app.pipeline },
      subscriptions: options.subscriptions,
      execute: options.execute,
      maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
      maxPerPrincipal: config.HTTP_MAX_STREAMS_PER_PRINCIPAL,
      heartbeatMs: config.HTTP_STREAM_HEARTBEAT_MS,
    });
    closeBeforeDrain(app, 'HTTP streams', () => streams.close());
    app.metrics.gauge({
      name: 'http_streams_open',
      help: 'Operations streamed over HTTP now (Server-Sent Events and multipart subscriptions)',
      collect: (gauge) => gauge.set(streams.count),
    });
    app.metrics.gauge({
      name: 'http_stream_slow_consumer_cuts_total',
      help: 'HTTP streams cut because their client stopped reading (its buffer or event queue overflowed), since start',
      collect: (gauge) => gauge.set(streams.slowConsumerCloses),
    });
    app.metrics.gauge({
      name: 'http_stream_results_delivered_total',
      help: 'Results written to HTTP streams (subscription events and streamed answers), since start',
      collect: (gauge) => gauge.set(streams.delivered),
    });
    app.decorate('httpStreams', streams);
  },
  { name: 'http-streams', fastify: '5.x', dependencies: ['metrics', 'pipeline'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** Subscriptions and operations streamed over HTTP (SSE and multipart). */
    httpStreams: HttpStreams;
  }
}
