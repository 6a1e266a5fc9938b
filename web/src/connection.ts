import { createClient as createSseClient, NetworkError } from 'graphql-sse';
import { createClient, type Client, type FormattedExecutionResult, type Sink } from 'graphql-ws/client';

/** What the page shows about its link to the gateway. */
export type ConnectionState =
  | { kind: 'connecting'; attempt: number }
  | { kind: 'live'; via: Transport }
  | { kind: 'reconnecting'; attempt: number; retryAt: number; reason: string }
  | { kind: 'unauthorized'; reason: string };

/** How the page reaches the gateway: a WebSocket, or (when none can be opened) Server-Sent Events. */
export type Transport = 'websocket' | 'sse';

/** What the connection asks of either transport's client: graphql-ws's and graphql-sse's have this shape. */
interface OperationClient {
  subscribe(
    payload: { query: string; variables?: Record<string, unknown> },
    sink: Sink<FormattedExecutionResult<Record<string, unknown>, unknown>>,
  ): () => void;
  dispose(): void | Promise<void>;
}

/** WebSocket attempts that fail before any has connected, after which the page uses SSE instead. */
const SOCKET_ATTEMPTS_BEFORE_SSE = 2;

/** Close codes the gateway uses (docs/subscriptions.md). */
const UNAUTHORIZED = 4401;

/** A subscription error that a later attempt may not get (the subgraph or database away for a moment). */
const TRANSIENT = new Set(['UPSTREAM_UNAVAILABLE', 'SERVICE_UNAVAILABLE']);
const TRANSIENT_RETRY_MS = 2000;

export interface ConnectionOptions {
  /** ws:// or wss:// URL of /graphql. */
  url: string;
  /** http:// or https:// URL of /graphql, for Server-Sent Events when no WebSocket can be opened. */
  httpUrl: string;
  /** The API key to send in connection_init, or null (demo mode needs none). Read at every connect. */
  credential(): string | null;
  /** Ping interval; a pong missing for `pongTimeoutMs` after a ping ends the connection. @default 10000 */
  keepAliveMs?: number;
  /** @default 5000 */
  pongTimeoutMs?: number;
  /** Longest wait between reconnect attempts. @default 5000 */
  maxRetryMs?: number;
}

export interface StreamOptions<T> {
  query: string;
  /** The subscription's variables, without `after` (the stream adds its cursor). */
  variables?: Record<string, unknown>;
  /** Where to start: the cursor read before the snapshot the stream continues (null: live only). */
  after: string | null;
  /** Checks one result's data; throws when it is not the expected shape. */
  parse(data: unknown): T;
  cursorOf(event: T): string;
  onEvent(event: T): void;
  /** The gateway refused the subscription or ended it with an error that a retry would not change. */
  onError?(message: string): void;
  /** The gateway ended the stream (a delivery completed, a session closed). */
  onEnd?(): void;
}

/** An open stream: its position, and a way to stop it. */
export interface Stream {
  /** The cursor of the newest event received; a reconnect resubscribes with `after:` it. */
  readonly cursor: string | null;
  close(): void;
}

interface ActiveStream {
  options: StreamOptions<unknown>;
  cursor: string | null;
  /** Ends the current subscription on the current socket, when there is one. */
  unsubscribe: (() => void) | null;
  closed: boolean;
  retry: ReturnType<typeof setTimeout> | null;
}

/** Orders two decimal cursors (int8 ids as text, no leading zeros). */
function compareCursors(a: string, b: string): number {
  return a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0;
}

/** The GraphQL errors of a result or an `error` message, as one line. */
function messagesOf(errors: readonly { message: string }[]): string {
  return errors.map((e) => e.message).join('; ');
}

function codesOf(errors: readonly { extensions?: Record<string, unknown> }[]): string[] {
  return errors.map((e) => {
    const code = e.extensions?.['code'];
    return typeof code === 'string' ? code : '';
  });
}

/**
 * A failed SSE request as the close a WebSocket would have seen: 401 as 4401, another HTTP refusal as
 * 4000 + its status with the gateway's message, a network failure as 1006.
 */
function closeOfHttp(error: unknown): { code: number; reason: string } {
  const response = error instanceof NetworkError ? (error as NetworkError<Response>).response : undefined;
  if (response) {
    const status = response.status;
    return { code: status === 401 ? UNAUTHORIZED : 4000 + status, reason: status === 401 ? 'This server needs an API key' : `HTTP ${status}` };
  }
  return { code: 1006, reason: error instanceof Error ? error.message : '' };
}

function closeOf(event: unknown): { code: number; reason: string } {
  if (typeof event === 'object' && event !== null && 'code' in event) {
    const { code, reason } = event as { code: unknown; reason?: unknown };
    return { code: typeof code === 'number' ? code : 0, reason: typeof reason === 'string' ? reason : '' };
  }
  return { code: 0, reason: event instanceof Error ? event.message : '' };
}

/**
 * One graphql-ws connection to the gateway that comes back by itself. When the socket drops (the network,
 * a restart, a slow-consumer close), it reconnects with a randomized backoff and resubscribes every open
 * stream with `after:` the cursor of the last event that stream delivered, so the gateway replays exactly
 * what was missed and nothing twice. A 4401 close (a missing or wrong key) stops it until `reconnect()`.
 * When no WebSocket can be opened at all (a proxy that blocks them), it speaks GraphQL over Server-Sent
 * Events instead (graphql-sse, one HTTP stream per subscription), each stream resuming the same way.
 */
export class Connection {
  private client: OperationClient | null = null;
  transport: Transport = 'websocket';
  /** Bumped at every connect and loss, so callbacks of a client already given up are ignored. */
  private generation = 0;
  private failures = 0;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private pongTimer: ReturnType<typeof setTimeout> | null = null;
  private connectedOnce = false;
  private readonly streams = new Set<ActiveStream>();
  private readonly stateListeners = new Set<(state: ConnectionState) => void>();
  private readonly connectedListeners = new Set<(first: boolean) => void>();
  state: ConnectionState = { kind: 'connecting', attempt: 1 };

  constructor(private readonly options: ConnectionOptions) {}

  onState(listener: (state: ConnectionState) => void): void {
    this.stateListeners.add(listener);
    listener(this.state);
  }

  /** Called after every connect, `first` on the first one; streams are already resubscribed then. */
  onConnected(listener: (first: boolean) => void): void {
    this.connectedListeners.add(listener);
  }

  start(): void {
    this.connect();
  }

  /** Drops the current socket (if any) and connects again at once, with the current credential. */
  reconnect(): void {
    this.abandon();
    this.failures = 0;
    this.connect();
  }

  private setState(state: ConnectionState): void {
    this.state = state;
    for (const listener of this.stateListeners) listener(state);
  }

  private connect(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const generation = ++this.generation;
    if (this.state.kind !== 'reconnecting') this.setState({ kind: 'connecting', attempt: this.failures + 1 });
    const stale = () => generation !== this.generation;
    if (this.transport === 'sse') {
      this.connectSse(stale);
      return;
    }
    let socket: WebSocket | null = null;
    const client: Client = createClient({
      url: this.options.url,
      lazy: false,
      // Reconnecting is done here, so that each stream resumes from its own cursor.
      retryAttempts: 0,
      keepAlive: this.options.keepAliveMs ?? 10_000,
      connectionParams: () => {
        const key = this.options.credential();
        return key ? { 'x-api-key': key } : {};
      },
      onNonLazyError: () => undefined,
      on: {
        connected: (s) => {
          if (stale()) return;
          socket = s as WebSocket;
          this.failures = 0;
          this.becameLive();
        },
        closed: (event) => {
          if (!stale()) this.lost(event);
        },
        ping: (received) => {
          if (received || stale()) return;
          // A connection that stopped carrying anything (no close seen) is ended and replaced.
          this.clearPongTimer();
          this.pongTimer = setTimeout(() => {
            if (!stale() && socket?.readyState === WebSocket.OPEN) client.terminate();
          }, this.options.pongTimeoutMs ?? 5000);
        },
        pong: (received) => {
          if (received) this.clearPongTimer();
        },
      },
    });
    this.client = client;
  }

  /**
   * Server-Sent Events: there is no connection to open, so the credential is checked with one small query
   * (a refused key shows the key form, an unreachable gateway the reconnect banner), then streams start.
   */
  private connectSse(stale: () => boolean): void {
    const client = createSseClient({
      url: this.options.httpUrl,
      retryAttempts: 0,
      headers: (): Record<string, string> => {
        const key = this.options.credential();
        return key ? { 'x-api-key': key } : {};
      },
    });
    this.client = client;
    client.subscribe(
      { query: '{ __typename }' },
      {
        next: () => undefined,
        error: (error: unknown) => {
          if (!stale()) this.lost(closeOfHttp(error));
        },
        complete: () => {
          if (stale()) return;
          this.failures = 0;
          this.becameLive();
        },
      },
    );
  }

  private becameLive(): void {
    this.setState({ kind: 'live', via: this.transport });
    for (const stream of this.streams) this.subscribe(stream);
    const first = !this.connectedOnce;
    this.connectedOnce = true;
    for (const listener of this.connectedListeners) listener(first);
  }

  private clearPongTimer(): void {
    if (this.pongTimer) clearTimeout(this.pongTimer);
    this.pongTimer = null;
  }

  /** Gives up the current client: its callbacks are ignored from now on. */
  private abandon(): void {
    this.generation++;
    this.clearPongTimer();
    for (const stream of this.streams) {
      stream.unsubscribe = null;
      if (stream.retry) clearTimeout(stream.retry);
      stream.retry = null;
    }
    const client = this.client;
    this.client = null;
    // Disposing a client whose connection was refused rejects with that close, which is already handled.
    if (client) Promise.resolve(client.dispose()).catch(() => undefined);
  }

  private lost(event: unknown): void {
    this.abandon();
    const { code, reason } = closeOf(event);
    if (code === UNAUTHORIZED) {
      this.setState({ kind: 'unauthorized', reason: reason || 'This server needs an API key' });
      return;
    }
    this.failures++;
    if (this.transport === 'websocket' && !this.connectedOnce && this.failures >= SOCKET_ATTEMPTS_BEFORE_SSE) {
      // No WebSocket has ever opened: something on the way blocks them. HTTP streams need no upgrade.
      this.transport = 'sse';
      this.failures = 0;
      this.connect();
      return;
    }
    const maxMs = this.options.maxRetryMs ?? 5000;
    const delay = Math.round(Math.min(maxMs, 250 * 2 ** (this.failures - 1)) * (0.75 + Math.random() * 0.5));
    const why = code === 1006 || code === 0 ? 'connection lost' : `closed ${code}${reason ? `: ${reason}` : ''}`;
    this.setState({ kind: 'reconnecting', attempt: this.failures, retryAt: Date.now() + delay, reason: why });
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  /** A query over the socket; rejects when not connected or when the answer has no data. */
  async query<T>(query: string, parse: (data: unknown) => T, variables: Record<string, unknown> = {}): Promise<{ data: T; errors: string[] }> {
    const client = this.client;
    if (!client || this.state.kind !== 'live') throw new Error('not connected');
    const result = await new Promise<FormattedExecutionResult<Record<string, unknown>, unknown>>((resolve, reject) => {
      let last: FormattedExecutionResult<Record<string, unknown>, unknown> | null = null;
      client.subscribe(
        { query, variables },
        {
          next: (value) => (last = value),
          error: (error: unknown) => reject(Array.isArray(error) ? new Error(messagesOf(error as { message: string }[])) : new Error('connection lost')),
          complete: () => (last ? resolve(last) : reject(new Error('no answer'))),
        },
      );
    });
    if (result.data === null || result.data === undefined) throw new Error(result.errors ? messagesOf(result.errors) : 'no data');
    return { data: parse(result.data), errors: (result.errors ?? []).map((e) => e.message) };
  }

  /** Opens a stream that survives reconnects, resuming from its last cursor. */
  stream<T>(options: StreamOptions<T>): Stream {
    const active: ActiveStream = { options: options, cursor: options.after, unsubscribe: null, closed: false, retry: null };
    this.streams.add(active);
    if (this.state.kind === 'live') this.subscribe(active);
    return {
      get cursor() {
        return active.cursor;
      },
      close: () => this.drop(active),
    };
  }

  private drop(stream: ActiveStream): void {
    stream.closed = true;
    if (stream.retry) clearTimeout(stream.retry);
    stream.unsubscribe?.();
    stream.unsubscribe = null;
    this.streams.delete(stream);
  }

  private subscribe(stream: ActiveStream): void {
    const client = this.client;
    if (!client || stream.closed) return;
    const generation = this.generation;
    const stale = () => generation !== this.generation || stream.closed;
    const { options } = stream;
    let retrying = false;
    const fail = (message: string) => {
      this.drop(stream);
      options.onError?.(message);
    };
    stream.unsubscribe = client.subscribe(
      { query: options.query, variables: { ...options.variables, after: stream.cursor } },
      {
        next: (result) => {
          if (stale()) return;
          if (result.errors && result.errors.length > 0) {
            // A subgraph lost mid-stream ends it with one error result: resubscribe from the last cursor.
            if (codesOf(result.errors).every((code) => TRANSIENT.has(code))) {
              retrying = true;
              stream.retry = setTimeout(() => {
                stream.retry = null;
                if (!stale()) this.subscribe(stream);
              }, TRANSIENT_RETRY_MS);
            } else {
              fail(messagesOf(result.errors));
            }
            return;
          }
          let event: unknown;
          try {
            event = options.parse(result.data);
          } catch (error) {
            fail(`unexpected event: ${error instanceof Error ? error.message : String(error)}`);
            return;
          }
          const cursor = options.cursorOf(event);
          // Replays start after the cursor; an event at or before it was shown already.
          if (stream.cursor !== null && compareCursors(cursor, stream.cursor) <= 0) return;
          stream.cursor = cursor;
          options.onEvent(event);
        },
        error: (error: unknown) => {
          // An `error` message (a refused operation) arrives as GraphQL errors; a lost socket as its close,
          // which the connection handles by resubscribing.
          if (stale()) return;
          if (Array.isArray(error)) {
            fail(messagesOf(error as { message: string }[]));
            return;
          }
          if (this.transport !== 'sse') return;
          // Over SSE each stream is its own request: a refusal ends it, a lost stream resumes from its cursor.
          const { code, reason } = closeOfHttp(error);
          if (code === UNAUTHORIZED) this.lost({ code, reason });
          else if (code >= 4400 && code < 4500 && code !== 4429) fail(reason);
          else {
            retrying = true;
            stream.retry = setTimeout(() => {
              stream.retry = null;
              if (!stale()) this.subscribe(stream);
            }, TRANSIENT_RETRY_MS);
          }
        },
        complete: () => {
          if (stale() || retrying) return;
          this.drop(stream);
          options.onEnd?.();
        },
      },
    );
  }
}
