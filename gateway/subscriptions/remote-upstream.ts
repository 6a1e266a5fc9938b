import { randomUUID } from 'node:crypto';
import { createClient, type Client, type Sink } from 'graphql-ws';
import type { ExecutionResult } from 'graphql';
import WebSocket from 'ws';
import { Channel } from '../../platform/channel.js';
import { StreamOverflowError } from '../../platform/event-hub.js';
import { PRINCIPAL_HEADER, subscriptionBody, type PrincipalSigner } from '../../platform/principal.js';
import { upstreamUnavailable } from '../sources/subgraph-errors.js';
import type { SubgraphTrust } from '../../platform/subgraph-trust.js';
import type { UpstreamOpener, UpstreamResult } from './executor.js';

export interface RemoteUpstreamOptions {
  /** Signs each subscription's principal for the subgraph (in the subscribe message's extensions): the only credential sent. */
  signer: PrincipalSigner | null;
  /** Which subgraph servers refuse unsigned calls: no other is subscribed to. */
  trust: SubgraphTrust;
  /** Ping interval; a subgraph that does not answer a ping within as long counts as lost. */
  keepAliveMs: number;
  /** Results that may wait in the gateway for one upstream subscription. @default 1000 */
  maxQueued?: number;
}

/** A resuming stream's socket stops being read above this many waiting results, and is read again below the low mark. */
const HIGH_WATER = 200;
const LOW_WATER = 50;

interface Connection {
  client: Client;
  socket: WebSocket | undefined;
  /** Not being read (a resuming stream's queue is full): pings go unanswered on purpose. */
  paused: boolean;
  /** Streams on this connection: each is ended (UPSTREAM_UNAVAILABLE) when the connection closes. */
  streams: Set<() => void>;
  pongTimer: NodeJS.Timeout | undefined;
}

/**
 * Opens subscription operations on subgraphs served by their own processes.
 *
 * Live streams of a subgraph share one graphql-ws connection, opened when the first needs it and closed
 * after the last. Their results wait in a bounded queue: when the gateway cannot keep up, the stream fails
 * as a slow consumer (4413 to its subscribers, who resume). A resuming stream gets a connection of its
 * own, so its replay can be paced: when its queue fills, that socket is no longer read and TCP pushes
 * back on the subgraph, which then reads the outbox no faster than the client takes events.
 *
 * Any close of a connection (a normal 1000 included: graphql-ws would otherwise resubscribe silently, a
 * gap for a live stream and a repeat for a resuming one) or a ping left unanswered for a keep-alive
 * interval ends each of its streams with one UPSTREAM_UNAVAILABLE result; clients resume from their last
 * cursor.
 */
export function remoteUpstream(urls: ReadonlyMap<string, string>, options: RemoteUpstreamOptions): { open: UpstreamOpener; close(): Promise<void> } {
  const maxQueued = options.maxQueued ?? 1000;
  /** The connection live streams of each subgraph share; every connection open, shared or a resuming stream's own. */
  const shared = new Map<string, Connection>();
  const all = new Set<Connection>();
  const connect = (url: string, lazyCloseTimeout: number) => {
    const connection = connectionTo(url, lazyCloseTimeout, options.keepAliveMs);
    all.add(connection);
    return connection;
  };
  const open: UpstreamOpener = async (service, request, context, { exclusive }): Promise<UpstreamResult> => {
    const url = urls.get(service);
    const signer = options.signer;
    if (!url || !signer) return { errors: [upstreamUnavailable(service)] };
    if ((await options.trust.current(service)) !== 'refuses-unsigned') return { errors: [upstreamUnavailable(service)] };
    if (exclusive) {
      const connection = connect(url, 0);
      const closeConnection = () => {
        all.delete(connection);
        void connection.client.dispose();
      };
      return subscribeOn(connection, { service, request, context, signer, paced: true, maxQueued: Number.POSITIVE_INFINITY, onStop: closeConnection });
    }
    const connection = shared.get(service) ?? connect(url, 1000);
    shared.set(service, connection);
    return subscribeOn(connection, { service, request, context, signer, paced: false, maxQueued, onStop: () => undefined });
  };
  return {
    open,
    async close() {
      await Promise.all([...all].map(async (c) => c.client.dispose()));
      all.clear();
      shared.clear();
    },
  };
}

/**
 * A lazy graphql-ws client of a subgraph server: closed `lazyCloseTimeout` after its last stream, never
 * retried, its socket terminated when a ping goes unanswered for a keep-alive interval (unless paused on
 * purpose), and every stream on it ended when it closes.
 */
function connectionTo(url: string, lazyCloseTimeout: number, keepAliveMs: number): Connection {
  const connection: Connection = {
    pongTimer: undefined,
    socket: undefined,
    paused: false,
    streams: new Set(),
    client: createClient({
      url: url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      lazy: true,
      lazyCloseTimeout,
      keepAlive: keepAliveMs,
      retryAttempts: 0,
      on: {
        connected: (socket) => {
          connection.socket = socket as WebSocket;
        },
        ping: (received) => {
          if (received || connection.paused) return;
          clearTimeout(connection.pongTimer);
          connection.pongTimer = setTimeout(() => {
            const socket = connection.socket;
            if (socket?.readyState === WebSocket.OPEN) socket.terminate();
          }, keepAliveMs);
          connection.pongTimer.unref();
        },
        pong: (received) => {
          if (received) clearTimeout(connection.pongTimer);
        },
        closed: () => {
          clearTimeout(connection.pongTimer);
          connection.socket = undefined;
          for (const end of [...connection.streams]) end();
        },
      },
    }),
  };
  return connection;
}

interface StreamRequest {
  service: string;
  request: Parameters<UpstreamOpener>[1];
  context: Parameters<UpstreamOpener>[2];
  signer: PrincipalSigner;
  /** A resuming stream's replay is paced: its socket stops being read while its queue is full. */
  paced: boolean;
  maxQueued: number;
  /** Called when the stream stops (its consumer returned, or it failed). */
  onStop: () => void;
}

/**
 * One subscription on `connection`, its principal signed over this subscribe message (query, variables,
 * operation name) for this subgraph (streams of several principals share a connection); its results
 * through a bounded queue, ended with one UPSTREAM_UNAVAILABLE result when the connection is lost.
 */
function subscribeOn(connection: Connection, stream: StreamRequest): AsyncIterableIterator<ExecutionResult> {
  const { service, request, context, paced } = stream;
  let unsubscribe: () => void = () => undefined;
  const stop = () => {
    connection.streams.delete(lost);
    unsubscribe();
    stream.onStop();
  };
  const channel = new Channel<ExecutionResult>(stop, stream.maxQueued, () => new StreamOverflowError());
  const lost = () => {
    // A paused connection was closed because this client stopped taking events: that is a slow
    // consumer (4413, resume), not a subgraph failure.
    if (connection.paused) channel.fail(new StreamOverflowError());
    else channel.push({ errors: [upstreamUnavailable(service)] } as unknown as ExecutionResult);
    channel.end();
    connection.streams.delete(lost);
    unsubscribe();
  };
  connection.streams.add(lost);
  const sink: Sink<ExecutionResult> = {
    next: (value) => {
      channel.push(value);
      if (paced && !connection.paused && channel.size >= HIGH_WATER) {
        connection.paused = true;
        clearTimeout(connection.pongTimer);
        connection.socket?.pause();
      }
    },
    error: () => lost(),
    complete: () => {
      connection.streams.delete(lost);
      channel.end();
    },
  };
  const requestId = context.headers['x-request-id'] ?? randomUUID();
  const payload = { query: request.query, variables: request.variables, ...(request.operationName ? { operationName: request.operationName } : {}) };
  const call = { subgraph: service, method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody(payload) };
  unsubscribe = connection.client.subscribe({ ...payload, extensions: { [PRINCIPAL_HEADER]: stream.signer.sign(context.principal, call), requestId } }, sink);
  return {
    async next() {
      const item = await channel.next();
      if (connection.paused && channel.size < LOW_WATER) {
        connection.paused = false;
        connection.socket?.resume();
      }
      return item;
    },
    return: () => channel.return(),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
