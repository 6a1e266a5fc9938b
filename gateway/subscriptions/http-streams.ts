import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sectionOf } from '../../platform/config.js';
import { subscriptionsConfig, type SubscriptionsConfig } from './config.js';
import { getOperationAST, GraphQLError, OperationTypeNode, type ExecutionResult } from 'graphql';
import { isEventCursor } from '../../platform/event-hub.js';
import { statusOf } from '../../platform/errors.js';
import { principalKey, type GatewayContext } from '../execution/context.js';
import type { Principal } from '../../platform/principal.js';
import { revocationOf, type Authenticator } from '../security/auth.js';
import { admitOperation, type OperationGate } from './admission.js';
import { cursorOf, SlowSubscriberError, type SubscriptionExecutor } from './executor.js';
import type { SocketExecution } from './ws-server.js';

/*
 * Subscriptions over plain HTTP on /graphql, for clients behind proxies that block WebSockets, with the
 * rules graphql-ws has: the request limits and trusted documents (checked by the route before this), the
 * same admission (gateway/subscriptions/admission.ts: validation, authorization, the rate limit), shared
 * upstream streams with resumable cursors, and slow consumers cut off.
 *
 * - Server-Sent Events, the `graphql-sse` protocol's distinct-connections mode (`Accept: text/event-stream`,
 *   GET or POST): each result is an `event: next` whose `id` is the event's cursor, then `event: complete`.
 *   A browser's EventSource (or any client) reconnecting with `Last-Event-ID` resumes after that cursor.
 *   Queries and mutations are served too (one `next`, then `complete`).
 * - Apollo's multipart subscriptions (`Accept: multipart/mixed;subscriptionSpec="1.0"`), as Apollo Router
 *   serves them to Apollo Client's HttpLink: each event a part `{"payload": result}`, a `{}` part as
 *   heartbeat, the body closed with the final boundary when the subscription ends.
 *
 * A consumer that stops reading (its send buffer over WS_MAX_BUFFERED_BYTES, or its event queue full) has
 * its response cut; it reconnects and resumes from its last cursor.
 */

export type StreamProtocol = 'sse' | 'multipart';

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

const BOUNDARY = 'graphql';
const MULTIPART_SUBSCRIPTION = `multipart/mixed;boundary="${BOUNDARY}";subscriptionSpec="1.0"`;

export class HttpStreams {
  private readonly open = new Set<Open>();
  private readonly perPrincipal = new Map<string, number>();
  private slowCuts = 0;

  constructor(private readonly options: HttpStreamsOptions) {}

  /** Streams open now, and responses cut as slow consumers since start. */
  get count(): number {
    return this.open.size;
  }

  get slowConsumerCloses(): number {
    return this.slowCuts;
  }

  /** Whether an Accept header asks for a stream (either protocol): /graphql does not answer it 406. */
  acceptsStream(accept: string | undefined): boolean {
    return this.protocolOf(accept, true) !== null;
  }

  /**
   * The protocol a request asks for: SSE for any operation, multipart only for a subscription (other
   * operations with that Accept are ordinary requests); null for an ordinary request.
   */
  protocolOf(accept: string | undefined, subscription: boolean): StreamProtocol | null {
    if (!accept) return null;
    const types = accept.split(',').map((part) => part.split(';').map((p) => p.trim().toLowerCase()));
    if (types.some(([type, ...params]) => type === 'text/event-stream' && !params.some((p) => p === 'q=0'))) return 'sse';
    const multipart = types.some(([type, ...params]) => type === 'multipart/mixed' && params.some((p) => p.replace(/"/g, '') === 'subscriptionspec=1.0'));
    return multipart && subscription ? 'multipart' : null;
  }

  /**
   * Starts one streamed operation (the reply hijacked), or answers why it cannot start. `context` carries
   * what the route took in (gateway/execution/pipeline.ts: document resolution and the limits).
   */
  async serve(
    request: FastifyRequest,
    reply: FastifyReply,
    protocol: StreamProtocol,
    context: GatewayContext,
    operation: { query: string; operationName: string | null; variables: Record<string, unknown> | null },
  ): Promise<FastifyReply> {
    const lastEventId = protocol === 'sse' ? request.headers['last-event-id'] : undefined;
    if (lastEventId !== undefined && (typeof lastEventId !== 'string' || !isEventCursor(lastEventId))) {
      return refuseWith(reply, [
        new GraphQLError('Last-Event-ID must be the cursor of an event this stream sent (its `id`: decimal digits)', { extensions: { code: 'BAD_REQUEST' } }),
      ]);
    }
    const { principal } = context;
    // A GET changes nothing (a page of another site can make a browser send one): mutations are POSTed.
    if (
      request.method === 'GET' &&
      context.intake &&
      getOperationAST(context.intake.document, operation.operationName)?.operation === OperationTypeNode.MUTATION
    ) {
      void reply.header('allow', 'POST');
      return refuseWith(reply, [new GraphQLError('A mutation is sent with POST, not GET', { extensions: { code: 'METHOD_NOT_ALLOWED' } })]);
    }
    const admitted = admitOperation(this.options.gate, {
      context,
      operationName: operation.operationName,
      variables: operation.variables,
      headers: { set: (name, value) => void reply.header(name, value) },
    });
    if ('errors' in admitted) return refuseWith(reply, admitted.errors);
    const key = principalKey(principal);
    const held = this.perPrincipal.get(key) ?? 0;
    if (held >= this.options.maxPerPrincipal) {
      return refuseWith(reply, [
        new GraphQLError(
          `Principal ${principal.id} already has ${held} streams open over HTTP; the limit is ${this.options.maxPerPrincipal} (HTTP_MAX_STREAMS_PER_PRINCIPAL): end one first`,
          { extensions: { code: 'SUBSCRIPTION_LIMIT_EXCEEDED', limit: { name: 'http_streams', max: this.options.maxPerPrincipal } } },
        ),
      ]);
    }
    // The stream's place is taken before anything is awaited, so concurrent requests cannot pass the cap.
    this.perPrincipal.set(key, held + 1);
    const release = () => {
      const left = (this.perPrincipal.get(key) ?? 1) - 1;
      if (left > 0) this.perPrincipal.set(key, left);
      else this.perPrincipal.delete(key);
    };
    // Set once the response is taken: a subscriber's queue overflowing cuts it.
    const slow = { cut: (): void => undefined };
    let source: AsyncIterator<ExecutionResult | Record<string, unknown>>;
    try {
      if (admitted.subscription) {
        const result = await this.options.subscriptions.subscribe({
          document: admitted.document,
          operationName: admitted.operationName,
          variables: admitted.variables,
          context,
          onSlow: () => slow.cut(),
          ...(typeof lastEventId === 'string' ? { after: lastEventId } : {}),
        });
        if (!(Symbol.asyncIterator in result)) {
          release();
          return refuseWith(reply, result.errors ?? []);
        }
        source = result;
      } else {
        const result = await this.options.execute(admitted.text, admitted.variables, admitted.operationName ?? undefined, context);
        source = Symbol.asyncIterator in result ? result : once(result);
      }
    } catch (error) {
      release();
      throw error;
    }

    const response = reply.raw;
    const headers = { ...reply.getHeaders(), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
    void reply.hijack();
    const writer = protocol === 'sse' ? sseWriter(response, headers) : multipartWriter(response, headers);
    const heartbeat = setInterval(() => writer.heartbeat(), this.options.heartbeatMs);
    // A stream opened with a credential that ends (a JWT) ends with it, as a WebSocket does: a last error
    // saying why, then the stream's end. The client opens another with a fresh token and resumes.
    const expiresAt = request.credentialExpiresAt;
    const expiry =
      expiresAt === null
        ? undefined
        : setTimeout(
            () => {
              if (done) return;
              writer.failed([
                {
                  message: 'The credential of this stream expired: open it again with a fresh one and resume from the last cursor',
                  extensions: { code: 'UNAUTHENTICATED' },
                },
              ]);
              finish(false);
            },
            Math.max(0, expiresAt - Date.now()),
          );
    expiry?.unref();
    let done = false;
    const entry: Open = {
      response,
      end: () => finish(false),
      credentials: { 'x-api-key': request.headers['x-api-key'], authorization: request.headers.authorization },
      principal,
      revoke: (reason) => {
        if (done) return;
        writer.failed([
          { message: `The credential of this stream is no longer valid (${reason}): open it again with a valid one`, extensions: { code: 'UNAUTHENTICATED' } },
        ]);
        finish(false);
      },
    };
    this.open.add(entry);
    const finish = (slow: boolean) => {
      if (done) return;
      done = true;
      clearInterval(heartbeat);
      clearTimeout(expiry);
      this.open.delete(entry);
      release();
      void source.return?.();
      if (slow) {
        this.slowCuts++;
        response.destroy();
      } else if (!response.destroyed) writer.end();
    };
    slow.cut = () => finish(true);
    // The response's close is the client going (the request's fired when its body was read).
    response.on('close', () => finish(false));
    void (async () => {
      for (;;) {
        const item = await source.next();
        if (done) break;
        if (item.done) break;
        if (response.writableLength > this.options.maxBufferedBytes) {
          finish(true);
          break;
        }
        writer.next(item.value, cursorOf(item.value));
      }
      finish(false);
    })().catch((error: unknown) => {
      finish(error instanceof SlowSubscriberError);
      if (!(error instanceof SlowSubscriberError)) request.log.error({ err: error }, 'event stream failed');
    });
    return reply;
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
 * Each result as JSON text, made once however many streams send it: subscribers of one shared stream get
 * the same result object.
 */
const serialized = new WeakMap<object, string>();
function jsonOf(result: unknown): string {
  if (typeof result !== 'object' || result === null) return JSON.stringify(result);
  let text = serialized.get(result);
  if (text === undefined) {
    text = JSON.stringify(result);
    serialized.set(result, text);
  }
  return text;
}

interface Writer {
  next(result: unknown, cursor: string | null): void;
  /** A last error that ends the operation (its credential expired), before `end`. */
  failed(errors: readonly { message: string; extensions: { code: string } }[]): void;
  heartbeat(): void;
  end(): void;
}

function sseWriter(response: ServerResponse, headers: Record<string, unknown>): Writer {
  response.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8' });
  // A comment at once: some browsers wait for the first bytes before they report the stream open.
  response.write(':\n\n');
  return {
    next: (result, cursor) => response.write(`${cursor !== null ? `id: ${cursor}\n` : ''}event: next\ndata: ${jsonOf(result)}\n\n`),
    failed: (errors) => response.write(`event: next\ndata: ${JSON.stringify({ errors })}\n\n`),
    heartbeat: () => response.write(':\n\n'),
    end: () => response.end('event: complete\ndata:\n\n'),
  };
}

function multipartWriter(response: ServerResponse, headers: Record<string, unknown>): Writer {
  response.writeHead(200, { ...headers, 'content-type': MULTIPART_SUBSCRIPTION });
  // Every part is followed by the boundary at once, so a client parses a part as soon as it arrives.
  response.write(`\r\n--${BOUNDARY}`);
  const part = (json: string) => response.write(`\r\ncontent-type: application/json; charset=utf-8\r\n\r\n${json}\r\n--${BOUNDARY}`);
  return {
    next: (result) => part(`{"payload":${jsonOf(result)}}`),
    // A transport-level error, as Apollo Router sends one: no payload, the errors beside it.
    failed: (errors) => part(JSON.stringify({ payload: null, errors })),
    heartbeat: () => part('{}'),
    end: () => response.end('--\r\n'),
  };
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
      subscriptions: app.subscriptions,
      execute: options.execute,
      maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
      maxPerPrincipal: config.HTTP_MAX_STREAMS_PER_PRINCIPAL,
      heartbeatMs: config.HTTP_STREAM_HEARTBEAT_MS,
    });
    app.addHook('preClose', async () => streams.close());
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
    app.decorate('httpStreams', streams);
  },
  { name: 'http-streams', fastify: '5.x', dependencies: ['metrics', 'pipeline', 'supergraph'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** Subscriptions and operations streamed over HTTP (SSE and multipart). */
    httpStreams: HttpStreams;
  }
}
