import type { Client, ClientConfig } from 'pg';
import { guarded } from './db-errors.js';

/** The `pg` module's default export: the driver, loaded only when PostgreSQL is used. */
export type Pg = typeof import('pg').default;

/** The first delay before a lost LISTEN connection is replaced, and the longest one after repeated failures. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5000;

/**
 * NOTIFY on PostgreSQL, over one LISTEN connection of its own (a pooled connection would LISTEN only while
 * it is checked out). It opens with the first channel listened to. When it drops (a database restart, a
 * failover, a terminated backend) it is replaced, with backoff, LISTENing on every channel again; then every
 * handler is called once, since notifications may have been missed meanwhile (listeners read what is new,
 * so an extra call is harmless).
 */
export class PgListener {
  readonly #handlers = new Map<string, Set<(payload: string) => void>>();
  #listener: Promise<Client> | undefined;
  #closed = false;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #reconnecting = false;
  #backoffMs = FIRST_BACKOFF_MS;
  readonly #pg: Pg;
  readonly #connection: ClientConfig;

  /** `connection` is the pool's: the same server, schema, timeouts and type parsers. */
  constructor(pg: Pg, connection: ClientConfig) {
    this.#pg = pg;
    this.#connection = connection;
  }

  /** Subscribes `onPayload` to NOTIFY on `channel`; resolves to its unsubscribe function. */
  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name ${channel}`);
    let set = this.#handlers.get(channel);
    if (!set) {
      set = new Set();
      this.#handlers.set(channel, set);
      // A listener being (re)connected LISTENs on every channel in `handlers` itself; LISTEN twice is a no-op.
      if (!this.#listener && !this.#reconnecting) this.#listener = this.#connect();
      const pending = this.#listener;
      const client = pending ? await guarded(() => pending) : undefined;
      await guarded(async () => client?.query(`LISTEN ${channel}`));
    }
    const handlers = set;
    handlers.add(onPayload);
    return async () => {
      handlers.delete(onPayload);
    };
  }

  /** Ends the LISTEN connection and stops replacing it. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    const client = await this.#listener?.catch(() => null);
    await client?.end().catch(() => undefined);
  }

  /** Opens a LISTEN connection on every channel subscribed to so far. */
  async #connect(): Promise<Client> {
    const client = new this.#pg.Client(this.#connection);
    let live = false;
    // An 'error' is followed by 'end', where the connection is replaced.
    client.on('error', () => undefined);
    client.on('end', () => {
      if (live && !this.#closed) this.#reconnect();
    });
    client.on('notification', (msg) => {
      for (const handler of this.#handlers.get(msg.channel) ?? []) handler(msg.payload ?? '');
    });
    try {
      await client.connect();
      for (const channel of this.#handlers.keys()) await client.query(`LISTEN ${channel}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    live = true;
    return client;
  }

  /** Replaces a lost LISTEN connection after the current backoff, doubling it after each failed attempt. */
  #reconnect(): void {
    this.#listener = undefined;
    this.#reconnecting = true;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = setTimeout(() => {
      if (this.#closed) return;
      const attempt = this.#connect();
      this.#listener = attempt;
      attempt.then(
        () => {
          this.#backoffMs = FIRST_BACKOFF_MS;
          this.#reconnecting = false;
          for (const set of this.#handlers.values()) for (const handler of set) handler('');
        },
        () => {
          this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
          this.#reconnect();
        },
      );
    }, this.#backoffMs);
    this.#reconnectTimer.unref();
  }
}
