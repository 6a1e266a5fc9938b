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
 *
 * One function, longer than most: its closure is the connection pool that `open` and `close` share, and the
 * per-connection handlers below read the pool's state; split apart they would pass it all around.
 */
export function remoteUpstream(urls: ReadonlyMap<string, string>, options: RemoteUpstreamOptions): { open: UpstreamOpener; close(): Promise<void> } {
  const maxQueued = options.maxQueued ?? 1000;
  const shared = new Map<string, Connection>();
  const all = new Set<Connection>();

  const connect = (url: string, lazyCloseTimeout: number): Connection => {
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
        keepAlive: options.keepAliveMs,
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
            }, options.keepAliveMs);
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
    all.add(connection);
    return connection;
  };

  const open: UpstreamOpener = async (service, request, context, { exclusive }): Promise<UpstreamResult> => {
    const url = urls.get(service);
    const signer = options.signer;
    if (!url || !signer) return { errors: [upstreamUnavailable(service)] };
    if ((await options.trust.current(service)) !== 'refuses-unsigned') return { errors: [upstreamUnavailable(service)] };
    let connection: Connection;
    if (exclusive) {
      connection = connect(url, 0);
    } else {
      connection = shared.get(service) ?? connect(url, 1000);
      shared.set(service, connection);
    }

    let unsubscribe: () => void = () => undefined;
    const stopStream = () => {
      connection.streams.delete(lost);
      unsubscribe();
      if (exclusive) {
        all.delete(connection);
        void connection.client.dispose();
      }
    };
    const channel = new Channel<ExecutionResult>(stopStream, exclusive ? Number.POSITIVE_INFINITY : maxQueued, () => new StreamOverflowError());
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
        if (exclusive && !connection.paused && channel.size >= HIGH_WATER) {
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
    // Streams of several principals share a connection: each subscription carries its own, signed over
    // this subscribe message (query, variables, operation name) for this subgraph.
    const requestId = context.headers['x-request-id'] ?? randomUUID();
    const payload = { query: request.query, variables: request.variables, ...(request.operationName ? { operationName: request.operationName } : {}) };
    const call = { subgraph: service, method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody(payload) };
    unsubscribe = connection.client.subscribe({ ...payload, extensions: { [PRINCIPAL_HEADER]: signer.sign(context.principal, call), requestId } }, sink);
    const stream: AsyncIterableIterator<ExecutionResult> = {
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
    return stream;
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
