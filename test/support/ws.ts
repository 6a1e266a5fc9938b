import { createClient, type Client, type FormattedExecutionResult } from 'graphql-ws';
import WebSocket from 'ws';
import { WAIT_MS } from './wait.js';

/** The close of a graphql-ws connection, as the client saw it. */
interface Closed {
  code: number;
  reason: string;
}

export interface WsClient {
  client: Client;
  /** Resolves with the first close of the connection. */
  closed: Promise<Closed>;
  dispose(): Promise<void>;
}

/** A graphql-transport-ws client for a test server (`http://...` base URL). */
export function wsClient(baseUrl: string, connectionParams?: Record<string, unknown>): WsClient {
  let onClosed: (c: Closed) => void = () => undefined;
  const closed = new Promise<Closed>((resolve) => (onClosed = resolve));
  const client = createClient({
    url: `${baseUrl.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    ...(connectionParams ? { connectionParams } : {}),
    on: {
      closed: (event) => {
        const e = event as { code: number; reason: string };
        onClosed({ code: e.code, reason: String(e.reason) });
      },
    },
    onNonLazyError: () => undefined,
  });
  return { client, closed, dispose: () => client.dispose() as Promise<void> };
}

/** One subscription's results, collected as they arrive. */
export class Collector<D = Record<string, any>> {
  readonly results: FormattedExecutionResult<D, unknown>[] = [];
  error: unknown;
  completed = false;
  private waiters: (() => void)[] = [];
  readonly unsubscribe: () => void;

  constructor(client: Client, query: string, variables: Record<string, unknown> = {}) {
    this.unsubscribe = client.subscribe<D>(
      { query, variables },
      {
        next: (value) => {
          this.results.push(value);
          this.wake();
        },
        error: (error) => {
          this.error = error;
          this.wake();
        },
        complete: () => {
          this.completed = true;
          this.wake();
        },
      },
    );
  }

  /** The data of every result so far (throws on a result with errors). */
  get data(): D[] {
    return this.results.map((r) => {
      if (r.errors) throw new Error(`subscription result with errors: ${JSON.stringify(r.errors)}`);
      return r.data as D;
    });
  }

  /** Waits until `predicate` holds over the collected results, failing after `timeoutMs`. */
  async until(predicate: (c: this) => boolean, timeoutMs = WAIT_MS, what = 'subscription results'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out waiting for ${what}; have ${this.results.length}: ${JSON.stringify(this.results).slice(0, 2000)}; error: ${String(this.error)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  count(n: number, timeoutMs?: number): Promise<void> {
    return this.until((c) => c.results.length >= n, timeoutMs, `${n} results`);
  }

  private wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
