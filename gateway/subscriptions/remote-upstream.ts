import { createClient, type Client } from 'graphql-ws';
import type { ExecutionResult } from 'graphql';
import WebSocket from 'ws';
import { upstreamUnavailable } from '../subgraph-errors.js';
import type { UpstreamOpener, UpstreamResult } from './executor.js';

/**
 * Opens subscription operations on subgraphs served by their own processes: one graphql-ws connection
 * per subgraph, opened when the first subscription needs it and closed when the last one ends. A lost
 * connection ends each of its streams with one UPSTREAM_UNAVAILABLE result; clients resume from their
 * last cursor.
 */
export function remoteUpstream(
  urls: ReadonlyMap<string, string>,
  options: { apiKey: string | undefined; keepAliveMs: number },
): { open: UpstreamOpener; close(): Promise<void> } {
  const clients = new Map<string, Client>();
  const clientFor = (service: string, url: string) => {
    let client = clients.get(service);
    if (!client) {
      client = createClient({
        url: url.replace(/^http/, 'ws'),
        webSocketImpl: WebSocket,
        lazy: true,
        lazyCloseTimeout: 1000,
        keepAlive: options.keepAliveMs,
        retryAttempts: 0,
        ...(options.apiKey ? { connectionParams: { 'x-api-key': options.apiKey } } : {}),
      });
      clients.set(service, client);
    }
    return client;
  };

  const open: UpstreamOpener = async (service, request): Promise<UpstreamResult> => {
    const url = urls.get(service);
    if (!url) return { errors: [upstreamUnavailable(service)] };
    const source = clientFor(service, url).iterate({
      query: request.query,
      variables: request.variables,
      ...(request.operationName ? { operationName: request.operationName } : {}),
    });
    let failed = false;
    const stream: AsyncIterableIterator<ExecutionResult> = {
      async next() {
        if (failed) return { value: undefined, done: true };
        try {
          return (await source.next()) as IteratorResult<ExecutionResult>;
        } catch {
          failed = true;
          return { value: { errors: [upstreamUnavailable(service)] } as unknown as ExecutionResult, done: false };
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
    return stream;
  };

  return {
    open,
    async close() {
      await Promise.all([...clients.values()].map((c) => c.dispose()));
      clients.clear();
    },
  };
}
