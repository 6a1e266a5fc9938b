import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers, nanos, type NatsConnection } from '@nats-io/transport-node';
import type { Database } from './db.js';
import { OUTBOX_CHANNEL } from './outbox.js';

/*
 * Relays the outbox to a NATS JetStream stream, each event exactly once into the stream:
 * - events are published in outbox order, each with its outbox id as JetStream's message id (so a
 *   publish repeated within the duplicate window is stored once) and in an `Ops-Outbox-Id` header;
 * - a batch is published pipelined (every message of it sent before the first ack is awaited), each
 *   message expecting the stream's last sequence to be the one before it (`Nats-Expected-Last-Sequence`):
 *   if one is lost (a connection dropped mid-batch), every later one of the batch is refused by the
 *   server instead of being stored out of order, and the relay reconciles and goes on from the last one
 *   stored;
 * - the relay's position (the last outbox id known to be in the stream) is kept in `outbox_relay` and
 *   only moves forward after JetStream acknowledged every event up to it;
 * - on every (re)connection the position is reconciled with the stream's own last message, so a crash
 *   between a publish and the position's update, however long the relay stays away, repeats nothing;
 * - one relay leads per database at a time (a lease renewed by conditional update with every batch):
 *   several processes on one PostgreSQL relay its outbox once.
 * Subjects are `<stream>.<topic>` (`OPS_EVENTS.rental.machine_status`). NATS going away is retried with
 * the client's own reconnection; the outbox keeps every event meanwhile.
 */

export const OUTBOX_ID_HEADER = 'Ops-Outbox-Id';
/** The identity of the database an event was relayed from (platform/migrations/005_database_identity.sql). */
export const LINEAGE_HEADER = 'Ops-Lineage';
/**
 * The event's audience (platform/outbox.ts) as JSON, "everyone" included. A message without it (one
 * relayed before audiences were explicit) reaches no tenant.
 */
export const AUDIENCE_HEADER = 'Ops-Audience';
/**
 * The event's state tags (platform/state-trace.ts) as a JSON array. A message without it (relayed before
 * events carried tags) is read as having changed anything (`*`).
 */
export const TAGS_HEADER = 'Ops-Tags';

export interface EventRelayOptions {
  url: string;
  stream: string;
  maxAgeS: number;
  maxBytes: number;
  duplicateWindowS: number;
  /** Events read and published per round. @default 500 */
  batch?: number;
  /** A round also runs this often without a notification. @default 1000 */
  pollMs?: number;
  /** How long a relay's lead lasts unless renewed. @default 10000 */
  leaseMs?: number;
  onError?: (error: unknown) => void;
  /**
   * The database was behind its own stream (restored from a backup): events `lostFrom`..`lostTo` are in the
   * stream but not in the database, and the outbox goes on after them. @default nothing
   */
  onRestore?: (range: { lostFrom: string; lostTo: string }) => void;
}

export interface RelayStatus {
  connected: boolean;
  leading: boolean;
  /** The last outbox id known to be in the stream. */
  position: string;
  /** Outbox events not yet in the stream, and the age in seconds of the oldest of them. */
  lagEvents: number;
  lagSeconds: number;
  /** The stream's size as JetStream reports it (null while NATS is away). */
  streamBytes: number | null;
  streamMessages: number | null;
  /** Events this relay stored in the stream since it started. */
  published: number;
  /**
   * Events it sent again that JetStream already held (deduplicated by their outbox id), as after an ack that
   * did not come back in time for a message the stream had stored: not in `published`.
   */
  repeated: number;
  /**
   * Whether the stream is this database's (`ok`) or holds another's (`foreign`: nothing is published, every
   * event waits in the outbox until an operator points EVENT_STREAM elsewhere or resets the stream).
   */
  lineage: 'ok' | 'foreign';
  /** Why the stream is foreign, and the way out. */
  lineageReason: string | null;
}

interface OutboxRow {
  id: string;
  topic: string;
  key: string | null;
  payload: unknown;
  audience: unknown;
  tags: string[] | null;
}

export class EventRelay {
  private readonly me = randomUUID();
  private position = 0n;
  private leading = false;
  private reconciled = false;
  /** When this relay's lease was last claimed or renewed (its own clock). */
  private renewedAt = 0;
  /** The stream's last sequence as this relay knows it (read when reconciling, then from each ack). */
  private streamSeq = 0;
  private closed = false;
  private running: Promise<void> | null = null;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private published = 0;
  private repeated = 0;
  private readonly encoder = new TextEncoder();
  /** Set while the stream holds another database's events: the relay publishes nothing. */
  private foreign: string | null = null;

  private constructor(
    private readonly identity: string,
    private readonly db: Database,
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: EventRelayOptions,
  ) {}

  /** Connects, makes sure the stream exists with the configured limits, and starts relaying. */
  /** `identity`: this database's (`databaseIdentity`), which every event it relays carries. */
  static async start(db: Database, identity: string, options: EventRelayOptions): Promise<EventRelay> {
    const nc = await connect({ servers: options.url, name: 'ops-supergraph-relay', maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    try {
      const jsm = await jetstreamManager(nc);
      await ensureStream(jsm, options);
      await db.query('INSERT INTO outbox_relay (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [options.stream]);
      const relay = new EventRelay(identity, db, nc, jetstream(nc), jsm, options);
      // The stream's lineage is known before the process serves: a restored database moves its outbox
      // sequence past the stream before it writes a single event.
      await relay.checkLineage();
      relay.watchConnection();
      // A commit wakes the leader; the others only try for the lead on their poll, costing nothing per event.
      relay.unlisten = await db.listen(OUTBOX_CHANNEL, () => {
        if (relay.leading) relay.wake();
      });
      relay.timer = setInterval(() => relay.wake(), options.pollMs ?? 1000);
      relay.timer.unref();
      relay.wake();
      return relay;
    } catch (error) {
      await nc.close().catch(() => undefined);
      throw error;
    }
  }

  /** Runs a round now, or right after the one under way. */
  wake(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((error: unknown) => {
        // The lead is given up on a failure: the next round reconciles with the stream before publishing.
        this.reconciled = false;
        this.options.onError?.(error);
      })
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Waits until every event committed so far is in the stream (tests and shutdown). */
  async drained(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await this.status();
      if (status.lagEvents === 0) return;
      if (Date.now() > deadline) throw new Error(`the relay is ${status.lagEvents} events behind`);
      this.wake();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async status(): Promise<RelayStatus> {
    const res = await this.db.query<{ newest: string | null; oldest_at: string | null }>(
      `SELECT (SELECT max(id)::text FROM outbox) AS newest,
              (SELECT min(created_at)::text FROM outbox WHERE id > $1::bigint) AS oldest_at`,
      [this.position.toString()],
    );
    const newest = BigInt(res.rows[0]?.newest ?? '0');
    const oldestAt = res.rows[0]?.oldest_at ? Date.parse(res.rows[0].oldest_at) : null;
    // The stream's size when asked (a scrape, a probe), not after every round of publishing.
    const info = this.connected ? await this.jsm.streams.info(this.options.stream).catch(() => null) : null;
    return {
      connected: !this.nc.isClosed() && this.connected,
      leading: this.leading,
      position: this.position.toString(),
      lagEvents: newest > this.position ? Number(newest - this.position) : 0,
      lagSeconds: oldestAt === null ? 0 : Math.max(0, (Date.now() - oldestAt) / 1000),
      streamBytes: info?.state.bytes ?? null,
      streamMessages: info?.state.messages ?? null,
      published: this.published,
      repeated: this.repeated,
      lineage: this.foreign ? 'foreign' : 'ok',
      lineageReason: this.foreign,
    };
  }

  /** Whether the stream holds another database's events (the relay then publishes nothing). */
  get refusing(): boolean {
    return this.foreign !== null;
  }

  /**
   * Reads the stream's newest message and decides whose stream it is:
   * - empty: this database's from now on;
   * - relayed from this database (its `Ops-Lineage`): this one's. If the stream is ahead of the outbox (a
   *   database restored from a backup older than the stream), the outbox sequence moves past the stream's
   *   last id, so no new event reuses an id a subscriber may hold, and the range the restore lost is logged;
   * - relayed from another database, or from before lineages were recorded by a relay that is not at its
   *   end: foreign. Nothing is published until an operator acts; the check runs again every round.
   */
  async checkLineage(): Promise<void> {
    // A stream started afresh (`npm run event-stream -- reset` deleted it) is made again here.
    let info = await this.jsm.streams.info(this.options.stream).catch(() => null);
    if (!info) {
      await ensureStream(this.jsm, this.options);
      info = await this.jsm.streams.info(this.options.stream);
    }
    this.streamSeq = info.state.last_seq;
    if (info.state.messages === 0) {
      this.foreign = null;
      return;
    }
    const last = await this.jsm.streams.getMessage(this.options.stream, { seq: info.state.last_seq });
    const theirs = last?.header.get(LINEAGE_HEADER) ?? '';
    const lastId = last?.header.get(OUTBOX_ID_HEADER) ?? '';
    const inStream = /^\d+$/.test(lastId) ? BigInt(lastId) : 0n;
    const position = BigInt(
      (await this.db.query<{ position: string }>('SELECT position::text AS position FROM outbox_relay WHERE name = $1', [this.options.stream])).rows[0]
        ?.position ?? '0',
    );
    const way = `point EVENT_STREAM at a stream of this deployment's own, or start this stream afresh with \`npm run event-stream -- reset\` (its events are deleted; subscribers resuming from them are told their cursor expired)`;
    if (theirs === '' && inStream !== position) {
      this.foreign = `stream ${this.options.stream} holds events relayed before databases were told apart, up to id ${inStream}, and this database's relay stands at ${position}: ${way}`;
      return;
    }
    if (theirs !== '' && theirs !== this.identity) {
      this.foreign = `stream ${this.options.stream} holds the events of database ${theirs}; this is database ${this.identity}: ${way}`;
      return;
    }
    this.foreign = null;
    // This database's own stream: is it ahead of the outbox (a restore)?
    // The last id the sequence gave (none yet: one before its start value).
    const seq = await this.db.query<{ last: string }>(`SELECT (CASE WHEN is_called THEN last_value ELSE last_value - 1 END)::text AS last FROM outbox_id_seq`);
    const newest = BigInt(seq.rows[0]?.last ?? '0');
    if (inStream > newest) {
      await this.db.query(`SELECT setval('outbox_id_seq', GREATEST($1::bigint, (SELECT last_value FROM outbox_id_seq)))`, [inStream.toString()]);
      this.options.onRestore?.({ lostFrom: (newest + 1n).toString(), lostTo: inStream.toString() });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.unlisten?.();
    await this.running;
    if (this.leading) {
      await this.db
        .query('UPDATE outbox_relay SET leader = NULL, lease_until = NULL WHERE name = $1 AND leader = $2', [this.options.stream, this.me])
        .catch(() => undefined);
    }
    await this.nc.close();
  }

  private connected = true;

  private watchConnection(): void {
    void (async () => {
      for await (const s of this.nc.status()) {
        if (s.type === 'disconnect') {
          this.connected = false;
          this.reconciled = false;
        } else if (s.type === 'reconnect') {
          this.connected = true;
          this.wake();
        }
      }
    })();
  }

  /** One round: lead (or not), reconcile with the stream once per connection, publish what is new. */
  private async round(): Promise<void> {
    const leaseMs = this.options.leaseMs ?? 10_000;
    // A lead renewed less than half a lease ago is still this relay's: no claim needed (every batch renews it).
    if (!(this.leading && this.reconciled && performance.now() - this.renewedAt < leaseMs / 2)) await this.claim(leaseMs);
    if (!this.leading) return;
    if (!this.reconciled || this.foreign) {
      // Whose stream it is, checked whenever the relay (re)connects, and every round while it is foreign.
      await this.checkLineage();
      if (this.foreign) return;
      const inStream = await this.lastRelayed();
      if (inStream > this.position) await this.advance(inStream);
      this.reconciled = true;
    }
    const subject = (topic: string) => `${this.options.stream}.${topic}`;
    const batch = this.options.batch ?? 500;
    for (;;) {
      const rows = await this.db.query<OutboxRow>(
        // Ordered by the bigint column, not by the text the id is read as ('10' sorts before '9').
        'SELECT id::text AS id, topic, key, payload, audience, tags FROM outbox WHERE id > $1::bigint ORDER BY outbox.id LIMIT $2',
        [this.position.toString(), batch],
      );
      if (rows.rows.length === 0) break;
      const acks = await Promise.allSettled(
        rows.rows.map((row, i) => {
          const h = headers();
          h.set(OUTBOX_ID_HEADER, row.id);
          h.set(LINEAGE_HEADER, this.identity);
          if (row.key !== null) h.set('Ops-Key', row.key);
          // Who may receive it travels with it: every reader of the stream applies the same rule.
          if (row.audience !== null) h.set(AUDIENCE_HEADER, JSON.stringify(row.audience));
          // What it changed travels with it too: every gateway's state cache drops the same entries.
          h.set(TAGS_HEADER, JSON.stringify(row.tags ?? ['*']));
          return this.js.publish(subject(row.topic), this.encoder.encode(JSON.stringify(row.payload)), {
            msgID: row.id,
            headers: h,
            expect: { lastSequence: this.streamSeq + i },
          });
        }),
      );
      // The stored prefix counts; the first refusal ends the round (the next reconciles with the stream).
      const stored = acks.findIndex((a) => a.status === 'rejected');
      const upTo = stored === -1 ? acks.length : stored;
      if (upTo > 0) {
        const stored = acks.slice(0, upTo) as PromiseFulfilledResult<{ seq: number; duplicate: boolean }>[];
        this.streamSeq = stored[upTo - 1]!.value.seq;
        const repeats = stored.filter((a) => a.value.duplicate).length;
        this.published += upTo - repeats;
        this.repeated += repeats;
        await this.advance(BigInt(rows.rows[upTo - 1]!.id));
      }
      if (stored !== -1) throw (acks[stored] as PromiseRejectedResult).reason;
      if (rows.rows.length < batch || this.closed) break;
    }
  }

  /** Takes or renews the lead, or learns that another relay has it; the position is then the database's. */
  private async claim(leaseMs: number): Promise<void> {
    const claimed = await this.db.query<{ position: string }>(
      `UPDATE outbox_relay SET leader = $2, lease_until = now() + ($3::int * interval '1 millisecond')
       WHERE name = $1 AND (leader IS NULL OR leader = $2 OR lease_until < now())
       RETURNING position::text AS position`,
      [this.options.stream, this.me, leaseMs],
    );
    this.leading = claimed.rows.length === 1;
    if (!this.leading) {
      // Another relay publishes meanwhile: leading again starts from the stream as it then is.
      this.reconciled = false;
      const row = await this.db.query<{ position: string }>('SELECT position::text AS position FROM outbox_relay WHERE name = $1', [this.options.stream]);
      this.position = BigInt(row.rows[0]?.position ?? '0');
      return;
    }
    this.position = BigInt(claimed.rows[0]!.position);
    this.renewedAt = performance.now();
  }

  /** The position moves forward only, and only while this relay leads; each move renews the lease. */
  private async advance(to: bigint): Promise<void> {
    const moved = await this.db.query(
      `UPDATE outbox_relay SET position = $2::bigint, lease_until = now() + ($4::int * interval '1 millisecond')
       WHERE name = $1 AND leader = $3 AND position < $2::bigint`,
      [this.options.stream, to.toString(), this.me, this.options.leaseMs ?? 10_000],
    );
    // Another relay took the lead (this one's lease ran out): it reconciles with the stream and goes on.
    if (moved.rowCount === 0) throw new Error(`relay ${this.me} no longer leads ${this.options.stream}`);
    this.position = to;
    this.renewedAt = performance.now();
  }

  /** The outbox id of the stream's newest message (0 for an empty stream). */
  private async lastRelayed(): Promise<bigint> {
    const info = await this.jsm.streams.info(this.options.stream);
    this.streamSeq = info.state.last_seq;
    if (info.state.messages === 0) return 0n;
    const last = await this.jsm.streams.getMessage(this.options.stream, { seq: info.state.last_seq });
    const id = last?.header.get(OUTBOX_ID_HEADER);
    return id && /^\d+$/.test(id) ? BigInt(id) : 0n;
  }
}

async function ensureStream(jsm: JetStreamManager, options: EventRelayOptions): Promise<void> {
  const config = {
    subjects: [`${options.stream}.>`],
    max_age: nanos(options.maxAgeS * 1000),
    max_bytes: options.maxBytes,
    duplicate_window: nanos(options.duplicateWindowS * 1000),
  };
  const existing = await jsm.streams.info(options.stream).catch(() => null);
  if (existing) await jsm.streams.update(options.stream, config);
  else await jsm.streams.add({ name: options.stream, storage: StorageType.File, ...config });
}
