import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { EventLog, StoredEvent } from './event-hub.js';
import { AUDIENCE_HEADER, OUTBOX_ID_HEADER, TAGS_HEADER } from './event-relay.js';
import { audienceOf } from './outbox.js';

/*
 * The event log read from the JetStream stream the outbox is relayed to (platform/event-relay.ts), so a
 * hub's live events and replays come from NATS rather than from the database. Message ids are outbox ids,
 * carried in the `Ops-Outbox-Id` header, and the relay publishes in id order, so sequence order is id
 * order: the sequence of the first event after a cursor is found by binary search over the stream, and a
 * replay is an ordered consumer from that sequence, filtered to the topic's subject.
 *
 * Live events come from one long-lived ordered consumer per process, from the sequence after the last
 * one read: JetStream pushes each stored message as it is stored (it wakes the hub), in sequence order,
 * and recreates the consumer from where it was after a reconnection. Anything unexpected (a position the
 * hub asks for that is not where the live consumer stands, the consumer gone) falls back to a read from
 * the stream and starts the live consumer again after it.
 */

type Sequenced = StoredEvent & { seq: number };

export interface JetStreamLogOptions {
  url: string;
  stream: string;
}

const KEY_HEADER = 'Ops-Key';

export class JetStreamLog implements EventLog {
  private readonly decoder = new TextDecoder();
  /**
   * Where the hub stands: events after outbox id `id` start at stream sequence `seq + 1`. The live
   * consumer goes on from it without a search.
   */
  private last: { id: bigint; seq: number } | null = null;
  private wakeHub: (() => void) | null = null;
  /** The live consumer: what it has received and the hub has not yet taken, and how to stop it. */
  private live: { buffer: Sequenced[]; stop: () => void; ended: boolean } | null = null;
  private closed = false;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
  ) {}

  static async open(options: JetStreamLogOptions): Promise<JetStreamLog> {
    const nc = await connect({ servers: options.url, name: 'ops-supergraph-log', maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    try {
      const jsm = await jetstreamManager(nc);
      // The relay creates the stream; a reader started first waits for it rather than failing.
      await jsm.streams.info(options.stream);
      return new JetStreamLog(nc, jetstream(nc), jsm, options.stream);
    } catch (error) {
      await nc.close().catch(() => undefined);
      throw error;
    }
  }

  async newest(): Promise<bigint> {
    const info = await this.jsm.streams.info(this.stream);
    const id = info.state.messages === 0 ? 0n : await this.idAt(info.state.last_seq);
    this.last = { id, seq: info.state.last_seq };
    return id;
  }

  /**
   * Events after this cursor are whole in the stream: one before the first message's outbox id (the
   * stream's age and size limits drop the oldest), or, for a stream whose every message was dropped, the
   * hub's position.
   */
  async horizon(_topic: string, position: bigint): Promise<bigint> {
    const info = await this.jsm.streams.info(this.stream);
    if (info.state.messages === 0) return info.state.first_seq > 1 ? position : 0n;
    const first = await this.idAt(info.state.first_seq);
    return first > 0n ? first - 1n : 0n;
  }

  async after(position: bigint, limit: number): Promise<StoredEvent[]> {
    const live = this.live;
    if (live && !live.ended && this.last && this.last.id === position) {
      const taken = live.buffer.splice(0, limit);
      const tail = taken.at(-1);
      if (tail) this.last = { id: BigInt(tail.id), seq: tail.seq };
      return taken.map(({ seq: _seq, ...event }) => event);
    }
    // Not where the live consumer stands: read from the stream, then go live from there.
    const info = await this.jsm.streams.info(this.stream);
    const start =
      info.state.messages === 0
        ? info.state.last_seq + 1
        : this.last && this.last.id === position
          ? this.last.seq + 1
          : await this.firstSeqAfter(position, info.state.first_seq, info.state.last_seq);
    const events = start > info.state.last_seq ? [] : await this.read(start, Math.min(limit, info.state.last_seq - start + 1), null);
    const tail = events.at(-1);
    this.last = tail ? { id: BigInt(tail.id), seq: tail.seq } : { id: position, seq: start - 1 };
    if (this.wakeHub) this.goLive(this.last.seq + 1);
    return events.map(({ seq: _seq, ...event }) => event);
  }

  async topic(topic: string, after: bigint, upTo: bigint, keys: ReadonlySet<string> | null, limit: number): Promise<StoredEvent[]> {
    const info = await this.jsm.streams.info(this.stream);
    if (info.state.messages === 0 || after >= upTo) return [];
    const start = await this.firstSeqAfter(after, info.state.first_seq, info.state.last_seq);
    if (start > info.state.last_seq) return [];
    const out: StoredEvent[] = [];
    // Read the topic's messages in pages until `limit` events of the keys asked for, or past `upTo`.
    let from = start;
    while (out.length < limit && from <= info.state.last_seq) {
      const page = await this.read(from, limit, `${this.stream}.${topic}`);
      if (page.length === 0) break;
      for (const event of page) {
        if (BigInt(event.id) > upTo) return out;
        if (!keys || (event.key !== null && keys.has(event.key)))
          out.push({ id: event.id, topic: event.topic, key: event.key, payload: event.payload, audience: event.audience, tags: event.tags });
        if (out.length >= limit) return out;
      }
      from = page.at(-1)!.seq + 1;
    }
    return out;
  }

  async watch(wake: () => void): Promise<() => Promise<void>> {
    this.wakeHub = wake;
    if (this.last) this.goLive(this.last.seq + 1);
    return async () => {
      this.closed = true;
      this.live?.stop();
      await this.nc.close();
    };
  }

  /** (Re)starts the live consumer from `seq`: each message it receives is buffered and wakes the hub. */
  private goLive(seq: number): void {
    this.live?.stop();
    if (this.closed) return;
    let messages: ConsumerMessages | null = null;
    let stopped = false;
    const live = {
      buffer: [] as Sequenced[],
      ended: false,
      stop: () => {
        stopped = true;
        live.ended = true;
        void messages?.close();
      },
    };
    this.live = live;
    void (async () => {
      const consumer = await this.js.consumers.get(this.stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: seq });
      if (stopped) return;
      messages = await consumer.consume();
      for await (const m of messages) {
        if (stopped) break;
        live.buffer.push(this.sequenced(m));
        this.wakeHub?.();
      }
    })()
      .catch(() => undefined)
      .finally(() => {
        // Ended without being stopped: the next read falls back to the stream and starts it again.
        live.ended = true;
        if (!stopped) this.wakeHub?.();
      });
  }

  /** The smallest sequence in [first, last] whose outbox id is above `id` (last + 1 when none is). */
  private async firstSeqAfter(id: bigint, first: number, last: number): Promise<number> {
    let lo = first;
    let hi = last + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if ((await this.idAt(mid)) > id) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  private async idAt(seq: number): Promise<bigint> {
    const m = await this.jsm.streams.getMessage(this.stream, { seq });
    if (!m) throw new Error(`message ${seq} of ${this.stream} is missing`);
    return BigInt(m.header.get(OUTBOX_ID_HEADER));
  }

  /** Up to `count` messages from sequence `from`, of `subject` when given, as events with their sequences. */
  private async read(from: number, count: number, subject: string | null): Promise<Sequenced[]> {
    const consumer = await this.js.consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: from,
      // One subject as a string: nats-server before 2.10 (Debian 12's) knows no list of them.
      ...(subject ? { filter_subjects: subject } : {}),
    });
    const pending = (await consumer.info(true)).num_pending;
    const wanted = Math.min(count, pending);
    if (wanted === 0) {
      await consumer.delete().catch(() => undefined);
      return [];
    }
    const out: Sequenced[] = [];
    const messages = await consumer.fetch({ max_messages: wanted, expires: 5000 });
    for await (const m of messages) {
      out.push(this.sequenced(m));
      if (out.length >= wanted) break;
    }
    await consumer.delete().catch(() => undefined);
    return out;
  }

  private sequenced(m: JsMsg): Sequenced {
    return { ...this.eventOf(m.subject, m.headers, m.data), seq: m.seq };
  }

  private eventOf(subject: string, h: JsMsg['headers'], data: Uint8Array): StoredEvent {
    const id = h?.get(OUTBOX_ID_HEADER);
    const key = h?.get(KEY_HEADER);
    const audience = h?.get(AUDIENCE_HEADER);
    const tags = h?.get(TAGS_HEADER);
    if (!id) throw new Error(`a message on ${subject} has no ${OUTBOX_ID_HEADER}`);
    return {
      id,
      topic: subject.slice(this.stream.length + 1),
      key: key ? key : null,
      payload: JSON.parse(this.decoder.decode(data)) as unknown,
      audience: audience ? audienceOf(parsedJson(audience)) : null,
      tags: tagsOf(tags),
    };
  }
}

/** A message's state tags: `*` (anything may have changed) when it carries none or they are not a list of text. */
function tagsOf(header: string | undefined): readonly string[] {
  const tags = header ? parsedJson(header) : undefined;
  return Array.isArray(tags) && tags.every((t) => typeof t === 'string') ? tags : ['*'];
}

/** A header's JSON, or undefined when it is not JSON (such an audience reaches no tenant). */
function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
