import { closeBeforeDrain } from '../http/app.js';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { GraphQLError, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { sectionOf } from '../../platform/config.js';
import { httpConfig, type HttpConfig } from '../http/config.js';
import { subscriptionsConfig, type SubscriptionsConfig } from './config.js';

import type { Context as WsConnection, SubscribePayload } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { revocationOf, type Authenticator } from '../security/auth.js';
import type { BrowserOrigins } from '../security/cors.js';
import type { Principal } from '../../platform/principal.js';
import { gatewayContextFrom, type GatewayContext } from '../pipeline/context.js';
import type { Pipeline } from '../pipeline/pipeline.js';
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
  /** The operation pipeline every operation on a socket runs (gateway/pipeline/pipeline.ts). */
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

interface GraphQLWebSocket {
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

/** graphql-ws's context of one connection: its open operations (`subscriptions`), its socket and request. */
type ConnectionContext = WsConnection<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>;

/**
 * graphql-transport-ws on the HTTP server's /graphql, with the gateway's credentials, pipeline and executors:
 * the state of open connections (their principal, credential and its expiry, their operations' contexts)
 * kept here, one method per graphql-ws hook.
 */
class GraphQLWebSocketServer implements GraphQLWebSocket {
  private readonly wss: WebSocketServer;
  private slowCloses = 0;
  /** Subscription results handed to connections since start (`websocket_results_delivered_total`). */
  private readonly deliveries = { count: 0 };
  /** The graphql-ws contexts of open connections, whose `subscriptions` are their open operations. */
  private readonly open = new Set<ConnectionContext>();
  /** The credential each connection presented in connection_init, checked again by `recheck`. */
  private readonly credentials = new WeakMap<object, ReturnType<typeof credentialHeadersOf>>();
  /** The context of each operation, made as its door took it in (graphql-ws hands `context` the same payload). */
  private readonly contexts = new WeakMap<object, GatewayContext>();
  /** The principal each connection authenticated as (connection_init). */
  private readonly principals = new WeakMap<object, Principal>();
  /** When each connection's credential expires (JWTs), in ms since the epoch. */
  private readonly expiries = new WeakMap<object, number>();
  private readonly disposer: { dispose(): void | Promise<void> };
  private readonly onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(request, socket, head);

  constructor(private readonly options: WsOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes });
    options.server.on('upgrade', this.onUpgrade);
    this.disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
      {
        schema: () => options.schema(),
        connectionInitWaitTimeout: options.connectionInitTimeoutMs,
        onConnect: (ctx) => this.connect(ctx),
        onClose: (ctx) => void this.open.delete(ctx),
        onSubscribe: (ctx, _id, payload) => this.subscribeMessage(ctx, payload),
        context: (ctx, _id, payload): WsContext => ({
          gateway: this.contexts.get(payload) ?? gatewayContextFrom(ctx.extra.request.headers, this.principals.get(ctx) ?? unauthenticated()),
          socket: ctx.extra.socket,
        }),
        execute: async (args) => {
          const ctx = args.contextValue as WsContext;
          // The text the door took in: the execution's intake guard checks it is the one judged.
          return options.execute(ctx.gateway.intake?.source ?? '', args.variableValues ?? {}, args.operationName ?? undefined, ctx.gateway);
        },
        subscribe: (args) => this.subscribe(args.contextValue as WsContext, args),
      },
      this.wss,
      options.keepAliveMs,
    );
  }

  connections(): number {
    return this.wss.clients.size;
  }

  operations(): number {
    let n = 0;
    for (const ctx of this.open) n += Object.keys(ctx.subscriptions).length;
    return n;
  }

  slowConsumerCloses(): number {
    return this.slowCloses;
  }

  /** Subscription results handed to graphql-ws connections since start. */
  delivered(): number {
    return this.deliveries.count;
  }

  /** Only /graphql upgrades, and a page of a site whose origin is not allowed is refused (403). */
  private upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (request.url ?? '').split('?')[0];
    if (path !== this.options.path) {
      socket.destroy();
      return;
    }
    if (this.options.browserOrigins.isForeign(request.headers)) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => this.wss.emit('connection', ws, request));
  }

  /** connection_init: the credential it carries resolves to a principal, or the socket closes 4401. */
  private async connect(ctx: ConnectionContext): Promise<boolean> {
    const presented = credentialHeadersOf(ctx.connectionParams);
    const result = await this.options.auth.authenticate(presented);
    if (!('principal' in result)) {
      ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized: send x-api-key or authorization in connection_init');
      return false;
    }
    this.principals.set(ctx, result.principal);
    this.credentials.set(ctx, presented);
    this.open.add(ctx);
    // A credential that ends (a JWT) ends the connection with it: closed at `exp`, whatever is open.
    if (result.expiresAt !== undefined) {
      this.expiries.set(ctx, result.expiresAt);
      const socket = ctx.extra.socket;
      const timer = setTimeout(() => closeExpired(socket), Math.max(0, result.expiresAt - Date.now()));
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    }
    return true;
  }

  /**
   * A subscribe message, judged here rather than in graphql-ws, so a bad document is an `error` message
   * for that operation, with a catalogue code, instead of a closed socket (graphql-ws closes on a parse
   * error): the credential still valid, the connection's operation cap, the first rate token, then the
   * operation pipeline as on every door.
   */
  private subscribeMessage(ctx: ConnectionContext, payload: SubscribePayload): readonly GraphQLError[] | ExecutionArgs {
    // An operation that arrives after the credential expired (before the timer closed the socket) runs nothing.
    const expiresAt = this.expiries.get(ctx);
    if (expiresAt !== undefined && Date.now() >= expiresAt) {
      closeExpired(ctx.extra.socket);
      return [new GraphQLError('The credential of this connection has expired: reconnect with a fresh one', { extensions: { code: 'UNAUTHENTICATED' } })];
    }
    // graphql-ws registers every operation of the connection (this one included) until it completes,
    // errs, or the client completes it.
    const others = Object.keys(ctx.subscriptions).length - 1;
    const max = this.options.maxSubscriptions;
    if (others >= max) {
      return [
        new GraphQLError(
          `This connection already has ${others} open operations; the limit is ${max} (WS_MAX_SUBSCRIPTIONS): complete one first or open another connection`,
          { extensions: { code: 'SUBSCRIPTION_LIMIT_EXCEEDED', limit: { name: 'subscriptions', max } } },
        ),
      ];
    }
    return this.admit(gatewayContextFrom(ctx.extra.request.headers, this.principals.get(ctx) ?? unauthenticated()), payload);
  }

  /**
   * The operation pipeline (gateway/pipeline/pipeline.ts): document resolution (APQ, trusted documents,
   * the safelist), the request limits, then validation and, for a subscription, its checks as it starts;
   * a query or mutation runs them in its execution.
   */
  private admit(context: GatewayContext, payload: SubscribePayload): readonly GraphQLError[] | ExecutionArgs {
    // Each subscribe message pays its first token as it arrives, as an HTTP request does at the edge:
    // a refusal at any step still costs one, and the operation's rate step charges the rest.
    const decision = this.options.rateLimiter.take(context.principal, 1);
    if (!decision.allowed) return [rateLimitedError(context.principal, decision)];
    if (!decision.unlimited) context.prepaid = 1;
    const taken = this.options.pipeline.intake({
      params: payload,
      variables: payload.variables,
      operationName: payload.operationName,
      principal: context.principal,
      clientName: context.client.name ?? undefined,
    });
    if (!taken.ok) return [taken.error];
    context.intake = taken.intake;
    const admitted = admitOperation(this.options, { context, operationName: payload.operationName, variables: payload.variables });
    if ('errors' in admitted) return admitted.errors;
    this.contexts.set(payload, context);
    return { schema: this.options.schema(), document: admitted.document, operationName: payload.operationName, variableValues: payload.variables };
  }

  /** A subscription's events from the shared upstream stream, its socket closed as a slow consumer when it falls behind. */
  private async subscribe(ctx: WsContext, args: ExecutionArgs) {
    const closeAsSlow = () => this.closeAsSlow(ctx.socket);
    const result = await this.options.subscriptions.subscribe({
      document: args.document,
      operationName: args.operationName,
      variables: args.variableValues ?? {},
      context: ctx.gateway,
      onSlow: closeAsSlow,
    });
    if (!(Symbol.asyncIterator in result)) return result;
    return guardSlowConsumer(result, ctx.socket, this.options.maxBufferedBytes, closeAsSlow, this.deliveries);
  }

  private closeAsSlow(socket: WebSocket): void {
    if (socket.readyState !== socket.OPEN) return;
    this.slowCloses++;
    socket.close(CloseCode.SlowConsumer, 'Slow consumer: events overflowed its buffer; resubscribe with your last cursor');
  }

  async recheck(): Promise<number> {
    let closed = 0;
    await Promise.all(
      [...this.open].map(async (ctx) => {
        const principal = this.principals.get(ctx);
        const presented = this.credentials.get(ctx);
        if (!principal || !presented) return;
        const reason = await revocationOf(this.options.auth, presented, principal);
        if (reason === null) return;
        const socket = ctx.extra.socket;
        if (socket.readyState !== socket.OPEN) return;
        closed++;
        socket.close(CloseCode.Unauthorized, `Unauthorized: the credential is no longer valid (${reason}); reconnect with a valid one`.slice(0, 120));
      }),
    );
    return closed;
  }

  async close(): Promise<void> {
    this.options.server.off('upgrade', this.onUpgrade);
    // graphql-ws sends 1001 to every client and waits for each to close; a peer that never answers
    // would hold the shutdown for ws's 30 s closing timeout. After a short grace it is cut off.
    const disposed = Promise.resolve(this.disposer.dispose());
    const grace = new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref());
    await Promise.race([disposed, grace]);
    for (const client of this.wss.clients) client.terminate();
    await disposed;
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

function closeExpired(socket: WebSocket): void {
  if (socket.readyState === socket.OPEN) socket.close(CloseCode.Unauthorized, 'Unauthorized: the credential expired; reconnect with a fresh one');
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
  deliveries: { count: number },
): AsyncIterableIterator<ExecutionResult> {
  return {
    async next() {
      if (socket.bufferedAmount > maxBufferedBytes) {
        slow();
        await source.return?.();
        return { value: undefined, done: true };
      }
      try {
        const result = await source.next();
        if (!result.done) deliveries.count++;
        return result;
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
  config: SubscriptionsConfig & HttpConfig;
  /** The schema served now, and what runs a query or mutation sent on a socket (gateway/graphql/apollo.ts). */
  schema: () => GraphQLSchema;
  /** Federated subscriptions (made from the supergraph, gateway/graphql/supergraph.ts). */
  subscriptions: SubscriptionExecutor;
  execute: SocketExecution;
}

/**
 * The `graphql-ws` part: graphql-transport-ws on the server's /graphql (`app.graphqlWs`), closed before
 * the server closes (it waits for its connections), with its gauges.
 */
export const graphqlWsPlugin = fp(
  async (app: FastifyInstance, options: GraphQLWebSocketPluginOptions) => {
    const config = { ...sectionOf(subscriptionsConfig, options.config, 'graphql-ws'), ...sectionOf(httpConfig, options.config, 'graphql-ws') };
    const socket = new GraphQLWebSocketServer({
      server: app.server,
      path: '/graphql',
      schema: options.schema,
      auth: app.auth,
      subscriptions: options.subscriptions,
      execute: options.execute,
      pipeline: app.pipeline,
      rateLimiter: app.rateLimiter,
      browserOrigins: app.browserOrigins,
      connectionInitTimeoutMs: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      keepAliveMs: config.WS_KEEPALIVE_MS,
      maxBufferedBytes: config.WS_MAX_BUFFERED_BYTES,
      maxPayloadBytes: config.BODY_LIMIT_BYTES,
      maxSubscriptions: config.WS_MAX_SUBSCRIPTIONS,
    });
    closeBeforeDrain(app, 'graphql-ws', () => socket.close());
    const gauges: Array<[string, string, () => number]> = [
      ['websocket_connections', 'Open graphql-ws connections', () => socket.connections()],
      ['websocket_operations', 'Operations open on graphql-ws connections (subscriptions and operations in flight)', () => socket.operations()],
      [
        'websocket_slow_consumer_closes_total',
        'Connections closed because events overflowed their buffer (4413), since start',
        () => socket.slowConsumerCloses(),
      ],
      ['websocket_results_delivered_total', 'Subscription results handed to graphql-ws connections, since start', () => socket.delivered()],
    ];
    for (const [name, help, read] of gauges) app.metrics.gauge({ name, help, collect: (gauge) => gauge.set(read()) });
    app.decorate('graphqlWs', socket);
  },
  { name: 'graphql-ws', fastify: '5.x', dependencies: ['metrics', 'edge-guard', 'pipeline'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** graphql-transport-ws on /graphql: its connections, operations and closes. */
    graphqlWs: GraphQLWebSocket;
  }
}
