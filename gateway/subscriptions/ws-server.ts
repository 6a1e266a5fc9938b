import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { GraphQLError, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { sectionOf } from '../../platform/config.js';
import { subscriptionsConfig, type SubscriptionsConfig } from './config.js';

import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { revocationOf, type Authenticator } from '../security/auth.js';
import type { BrowserOrigins } from '../security/cors.js';
import type { Principal } from '../../platform/principal.js';
import { gatewayContextFrom, type GatewayContext } from '../execution/context.js';
import type { Pipeline } from '../execution/pipeline.js';
import { rateLimitedError, type RateLimiter } from '../security/rate-limit.js';
import { admitOperation } from './admission.js';
import { CloseCode } from './close-codes.js';
import { SlowSubscriberError, type SubscriptionExecutor } from './executor.js';

interface WsOptions {
  server: Server;
  path: string;
  /** The schema served now (a reload swaps it). */
  schema: () => GraphQLSchema;
  auth: Authenticator;
  /** A WebSocket opened by a page of another site whose origin is not allowed is refused (403). */
  browserOrigins: BrowserOrigins;
  /** The operation pipeline every operation on a socket runs (gateway/execution/pipeline.ts). */
  pipeline: Pipeline;
  /** Takes each subscribe message's first token as it arrives (the pipeline's rate step charges the rest). */
  rateLimiter: RateLimiter;
  subscriptions: SubscriptionExecutor;
  /**
   * Runs queries and mutations sent over the socket through the gateway: one result, or (deferred
   * fragments) the initial payload and those after it, each sent as a `next` message.
   */
  execute: SocketExecution;
  /** Close a connection that has not sent connection_init by then. */
  connectionInitTimeoutMs: number;
  /** Ping interval; a peer that misses a pong for as long is dropped. */
  keepAliveMs: number;
  /** Bytes that may wait in one socket's send buffer before it is closed as a slow consumer. */
  maxBufferedBytes: number;
  maxPayloadBytes: number;
  /** Operations one connection may have open at once; more are refused with an `error`, the connection kept. */
  maxSubscriptions: number;
}

export interface GraphQLWebSocket {
  close(): Promise<void>;
  /**
   * Authenticates every open connection's credential again (a key gone from the keys file, a token whose
   * signing key left the JWKS): one that no longer names its principal is closed 4401. Resolves to how many.
   */
  recheck(): Promise<number>;
  connections(): number;
  /** Operations open on all connections (subscriptions, and queries or mutations in flight). */
  operations(): number;
  slowConsumerCloses(): number;
}

/** Runs a query or mutation sent on a socket: one result, or the initial payload and the deferred ones after it. */
export type SocketExecution = (
  query: string,
  variables: Record<string, unknown>,
  operationName: string | undefined,
  context: GatewayContext,
) => Promise<ExecutionResult | AsyncGenerator<ExecutionResult | Record<string, unknown>>>;

/** How long clients get to answer the close at shutdown before their sockets are cut. */
const SHUTDOWN_GRACE_MS = 1000;

interface WsContext {
  gateway: GatewayContext;
  socket: WebSocket;
}

/**
 * graphql-transport-ws on the HTTP server's /graphql, with the gateway's auth and executors. One function,
 * longer than most: graphql-ws takes its hooks as one options object (`useServer`), and each hook reads the
 * connection state kept in this closure (counts, slow-consumer closes, the socket per connection).
 */
function attachGraphQLWebSocket(options: WsOptions): GraphQLWebSocket {
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes });
  let slowConsumerCloses = 0;
  /** The graphql-ws contexts of open connections, whose `subscriptions` are their open operations. */
  const open = new Set<{ subscriptions: Record<string, unknown> }>();
  const closeAsSlow = (socket: WebSocket) => {
    if (socket.readyState !== socket.OPEN) return;
    slowConsumerCloses++;
    socket.close(CloseCode.SlowConsumer, 'Slow consumer: events overflowed its buffer; resubscribe with your last cursor');
  };
  /** The credential each connection presented in connection_init, checked again by `recheck`. */
  const credentials = new WeakMap<object, ReturnType<typeof credentialHeadersOf>>();
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== options.path) {
      socket.destroy();
      return;
    }
    if (options.browserOrigins.isForeign(request.headers)) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  };
  options.server.on('upgrade', onUpgrade);

  /** The context of each operation, made as its door took it in (graphql-ws hands `context` the same payload). */
  const contexts = new WeakMap<object, GatewayContext>();
  /** The principal each connection authenticated as (connection_init). */
  const principals = new WeakMap<object, Principal>();
  /** When each connection's credential expires (JWTs), in ms since the epoch. */
  const expiries = new WeakMap<object, number>();
  const closeExpired = (socket: WebSocket) => {
    if (socket.readyState === socket.OPEN) socket.close(CloseCode.Unauthorized, 'Unauthorized: the credential expired; reconnect with a fresh one');
  };
  const disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
    {
      schema: () => options.schema(),
      connectionInitWaitTimeout: options.connectionInitTimeoutMs,
      onConnect: async (ctx) => {
        const presented = credentialHeadersOf(ctx.connectionParams);
        const result = await options.auth.authenticate(presented);
        if ('principal' in result) {
          principals.set(ctx, result.principal);
          credentials.set(ctx, presented);
          open.add(ctx);
          // A credential that ends (a JWT) ends the connection with it: closed at `exp`, whatever is open.
          if (result.expiresAt !== undefined) {
            expiries.set(ctx, result.expiresAt);
            const socket = ctx.extra.socket;
            const timer = setTimeout(() => closeExpired(socket), Math.max(0, result.expiresAt - Date.now()));
            timer.unref();
            socket.once('close', () => clearTimeout(timer));
          }
          return true;
        }
        ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized: send x-api-key or authorization in connection_init');
        return false;
      },
      onClose: (ctx) => {
        open.delete(ctx);
      },
      // Parse and validate here rather than in graphql-ws, so a bad document is an `error` message for
      // that operation, with a catalogue code, instead of a closed socket (graphql-ws closes on a parse error).
      onSubscribe: (ctx, _id, payload) => {
        // An operation that arrives after the credential expired (before the timer closed the socket) runs nothing.
        const expiresAt = expiries.get(ctx);
        if (expiresAt !== undefined && Date.now() >= expiresAt) {
          closeExpired(ctx.extra.socket);
          return [new GraphQLError('The credential of this connection has expired: reconnect with a fresh one', { extensions: { code: 'UNAUTHENTICATED' } })];
        }
        // graphql-ws registers every operation of the connection (this one included) until it completes,
        // errs, or the client completes it.
        const others = Object.keys(ctx.subscriptions).length - 1;
        if (others >= options.maxSubscriptions) {
          return [
            new GraphQLError(
              `This connection already has ${others} open operations; the limit is ${options.maxSubscriptions} (WS_MAX_SUBSCRIPTIONS): complete one first or open another connection`,
              {
                extensions: { code: 'SUBSCRIPTION_LIMIT_EXCEEDED', limit: { name: 'subscriptions', max: options.maxSubscriptions } },
              },
            ),
          ];
        }
        // The operation pipeline (gateway/execution/pipeline.ts), as on every door: document resolution
        // (APQ, trusted documents, the safelist), the request limits, then validation and, for a
        // subscription, its checks as it starts; a query or mutation runs them in its execution.
        const context = gatewayContextFrom(ctx.extra.request.headers, principals.get(ctx) ?? unauthenticated());
        // Each subscribe message pays its first token as it arrives, as an HTTP request does at the edge:
        // a refusal at any step still costs one, and the operation's rate step charges the rest.
        const decision = options.rateLimiter.take(context.principal, 1);
        if (!decision.allowed) return [rateLimitedError(context.principal, decision)];
        if (!decision.unlimited) context.prepaid = 1;
        const taken = options.pipeline.intake({
          params: payload,
          variables: payload.variables,
          operationName: payload.operationName,
          principal: context.principal,
          clientName: context.client.name ?? undefined,
        });
        if (!taken.ok) return [taken.error];
        context.intake = taken.intake;
        const admitted = admitOperation(options, { context, operationName: payload.operationName, variables: payload.variables });
        if ('errors' in admitted) return admitted.errors;
        contexts.set(payload, context);
        return { schema: options.schema(), document: admitted.document, operationName: payload.operationName, variableValues: payload.variables };
      },
      context: (ctx, _id, payload): WsContext => ({
        gateway: contexts.get(payload) ?? gatewayContextFrom(ctx.extra.request.headers, principals.get(ctx) ?? unauthenticated()),
        socket: ctx.extra.socket,
      }),
      execute: async (args) => {
        const ctx = args.contextValue as WsContext;
        // The text the door took in: the execution's intake guard checks it is the one judged.
        return options.execute(ctx.gateway.intake?.source ?? '', args.variableValues ?? {}, args.operationName ?? undefined, ctx.gateway);
      },
      subscribe: async (args) => {
        const ctx = args.contextValue as WsContext;
        const result = await options.subscriptions.subscribe({
          document: args.document,
          operationName: args.operationName,
          variables: args.variableValues ?? {},
          context: ctx.gateway,
          onSlow: () => closeAsSlow(ctx.socket),
        });
        if (!(Symbol.asyncIterator in result)) return result;
        return guardSlowConsumer(result, ctx.socket, options.maxBufferedBytes, () => closeAsSlow(ctx.socket));
      },
    },
    wss,
    options.keepAliveMs,
  );

  return {
    connections: () => wss.clients.size,
    operations: () => {
      let n = 0;
      for (const ctx of open) n += Object.keys(ctx.subscriptions).length;
      return n;
    },
    slowConsumerCloses: () => slowConsumerCloses,
    async recheck() {
      let closed = 0;
      await Promise.all(
        [...open].map(async (ctx) => {
          const principal = principals.get(ctx);
          const presented = credentials.get(ctx);
          if (!principal || !presented) return;
          const reason = await revocationOf(options.auth, presented, principal);
          if (reason === null) return;
          const socket = (ctx as unknown as { extra: { socket: WebSocket } }).extra.socket;
          if (socket.readyState !== socket.OPEN) return;
          closed++;
          socket.close(CloseCode.Unauthorized, `Unauthorized: the credential is no longer valid (${reason}); reconnect with a valid one`.slice(0, 120));
        }),
      );
      return closed;
    },
    async close() {
      options.server.off('upgrade', onUpgrade);
      // graphql-ws sends 1001 to every client and waits for each to close; a peer that never answers
      // would hold the shutdown for ws's 30 s closing timeout. After a short grace it is cut off.
      const disposed = disposer.dispose();
      const grace = new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref());
      await Promise.race([disposed, grace]);
      for (const client of wss.clients) client.terminate();
      await disposed;
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * Ends a slow subscriber's connection instead of letting it hold memory: when its socket's send buffer
 * or its event queue overflows, the socket closes with CloseCode.SlowConsumer and the client resumes
 * from its last cursor.
 */
function guardSlowConsumer(
  source: AsyncIterableIterator<ExecutionResult>,
  socket: WebSocket,
  maxBufferedBytes: number,
  slow: () => void,
): AsyncIterableIterator<ExecutionResult> {
  return {
    async next() {
      if (socket.bufferedAmount > maxBufferedBytes) {
        slow();
        await source.return?.();
        return { value: undefined, done: true };
      }
      try {
        return await source.next();
      } catch (error) {
        if (error instanceof SlowSubscriberError) {
          slow();
          return { value: undefined, done: true };
        }
        throw error;
      }
    },
    async return() {
      await source.return?.();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** The connection_init payload's credentials as the headers an HTTP request would carry them in. */
function credentialHeadersOf(params: Record<string, unknown> | undefined): { 'x-api-key'?: string; authorization?: string } {
  const headers: { 'x-api-key'?: string; authorization?: string } = {};
  for (const [key, value] of Object.entries(params ?? {})) {
    const name = key.toLowerCase();
    if (name !== 'x-api-key' && name !== 'authorization') continue;
    // A credential that is not a string is a wrong one, not an absent one.
    if (typeof value === 'string') headers[name] = value;
    else headers[name] = name === 'authorization' ? 'Bearer' : '';
  }
  return headers;
}

/** graphql-ws runs operations only on acknowledged connections, and every acknowledged one has a principal. */
function unauthenticated(): never {
  throw new Error('an operation on a connection that did not authenticate');
}

export interface GraphQLWebSocketPluginOptions {
  config: SubscriptionsConfig & { BODY_LIMIT_BYTES: number };
  /** The schema served now, and what runs a query or mutation sent on a socket (gateway/graphql/apollo.ts). */
  schema: () => GraphQLSchema;
  execute: SocketExecution;
}

/**
 * The `graphql-ws` part: graphql-transport-ws on the server's /graphql (`app.graphqlWs`), closed before
 * the server closes (it waits for its connections), with its gauges.
 */
export const graphqlWsPlugin = fp(
  async (app: FastifyInstance, options: GraphQLWebSocketPluginOptions) => {
    const config = sectionOf(subscriptionsConfig, options.config, 'graphql-ws');
    const socket = attachGraphQLWebSocket({
      server: app.server,
      path: '/graphql',
      schema: options.schema,
      auth: app.auth,
      subscriptions: app.subscriptions,
      execute: options.execute,
      pipeline: app.pipeline,
      rateLimiter: app.rateLimiter,
      browserOrigins: app.browserOrigins,
      connectionInitTimeoutMs: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      keepAliveMs: config.WS_KEEPALIVE_MS,
      maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
      maxPayloadBytes: options.config.BODY_LIMIT_BYTES,
      maxSubscriptions: config.WS_MAX_SUBSCRIPTIONS,
    });
    app.addHook('preClose', () => socket.close());
    const gauges: Array<[string, string, () => number]> = [
      ['websocket_connections', 'Open graphql-ws connections', () => socket.connections()],
      ['websocket_operations', 'Operations open on graphql-ws connections (subscriptions and operations in flight)', () => socket.operations()],
      [
        'websocket_slow_consumer_closes_total',
        'Connections closed because events overflowed their buffer (4413), since start',
        () => socket.slowConsumerCloses(),
      ],
    ];
    for (const [name, help, read] of gauges) app.metrics.gauge({ name, help, collect: (gauge) => gauge.set(read()) });
    app.decorate('graphqlWs', socket);
  },
  { name: 'graphql-ws', fastify: '5.x', dependencies: ['metrics', 'edge-guard', 'pipeline', 'supergraph'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** graphql-transport-ws on /graphql: its connections, operations and closes. */
    graphqlWs: GraphQLWebSocket;
  }
}
