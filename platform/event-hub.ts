import type { Database } from './db.js';
import { Channel } from './channel.js';
import { GraphQLError } from 'graphql';
import { domainError } from './errors.js';
import { outboxHorizon } from './outbox-retention.js';
import { audienceOf, OUTBOX_CHANNEL, type Audience } from './outbox.js';
import { mayView, type Viewer } from './ownership.js';

/** One stored event; `id` is its cursor (a decimal string: bigint ids do not fit a JS number forever). */
export interface StoredEvent<P = unknown> {
  id: string;
  topic: string;
  key: string | null;
  payload: P;
  /** Who may receive it (platform/outbox.ts, read by `audienceOf`); null: no tenant, operators only. */
  audience: Audience | null;
  /** What it changed, as state caches read it (platform/state-trace.ts); empty for an event about no state. */
  tags: readonly string[];
}

/**
 * The event as `viewer` may receive it: whole (fleet-wide, its own, or an operator), with the owner's
 * private fields null (another owner's event that every subscriber sees), or not at all (null). An event
 * that declares no audience reaches operators only.
 */
function eventSeenBy<P>(event: StoredEvent<P>, viewer: Viewer): StoredEvent<P> | null {
  const audience = event.audience;
  if (viewer.all || audience === 'everyone') return event;
  if (audience === null) return null;
  if (mayView(viewer, audience.owner, audience.grain)) return event;
  if (!audience.private) return null;
  const payload = { ...(event.payload as Record<string, unknown>) };
  for (const field of audience.private) if (field in payload) payload[field] = null;
  return { ...event, payload: payload as P };
}

export interface StreamOptions {
  /** Who receives the stream: it gets only the events, and the parts of them, this viewer may see. */
  viewer: Viewer;
  /** Replay every event after this cursor first. */
  after?: string | null;
  /** Only events with one of these keys. */
  keys?: readonly string[] | null;
  /** Ends the stream with an error when this many events wait unread. @default 10000 */
  maxQueued?: number;
}

export class StreamOverflowError extends Error {
  constructor() {
    super('Too many undelivered events: resubscribe with the last cursor');
    this.name = 'StreamOverflowError';
  }
}

type Listener = (event: StoredEvent) => void;

/**
 * Where a hub reads events: the outbox table (the default) or a stream the outbox is relayed to
 * (platform/jetstream-log.ts). Ids are outbox ids either way, so cursors mean the same.
 */
export interface EventLog {
  /** The newest event id in the log (0 when it is empty). */
  newest(): Promise<bigint>;
  /** Events with ids above `position`, every topic, in id order, at most `limit`. */
  after(position: bigint, limit: number): Promise<StoredEvent[]>;
  /** Events of `topic` with ids in (after, upTo], of `keys` when given, in id order, at most `limit`. */
  topic(topic: string, after: bigint, upTo: bigint, keys: ReadonlySet<string> | null, limit: number): Promise<StoredEvent[]>;
  /** Calls `wake` whenever new events may be there; resolves to a function that stops it. */
  watch(wake: () => void): Promise<() => Promise<void>>;
  /**
   * The oldest cursor of `topic` the log is whole after: every event of the topic with a greater id is
   * there, some at or below it may be gone (retention). `position` is the hub's.
   */
  horizon(topic: string, position: bigint): Promise<bigint>;
}

type StoredRow = Omit<StoredEvent, 'audience' | 'tags'> & { audience: unknown; tags: string[] | null };

// An event without tags (NULL: written before events carried them) may have changed anything.
const storedEventOf = (row: StoredRow): StoredEvent => ({ ...row, audience: audienceOf(row.audience), tags: row.tags ?? ['*'] });

/** The outbox table itself: NOTIFY wakes the hub, from any instance writing to the same database. */
export function outboxLog(db: Database): EventLog {
  return {
    async newest() {
      const res = await db.query<{ max: string | null }>('SELECT max(id)::text AS max FROM outbox');
      return BigInt(res.rows[0]?.max ?? '0');
    },
    async after(position, limit) {
      const res = await db.query<StoredRow>(
        'SELECT id::text AS id, topic, key, payload, audience, tags FROM outbox WHERE id > $1 ORDER BY outbox.id LIMIT $2',
        [position.toString(), limit],
      );
      return res.rows.map(storedEventOf);
    },
    async topic(topic, after, upTo, keys, limit) {
      const res = await db.query<StoredRow>(
        `SELECT id::text AS id, topic, key, payload, audience, tags FROM outbox
         WHERE topic = $1 AND id > $2 AND id <= $3 AND ($4::text[] IS NULL OR key = ANY($4))
         ORDER BY outbox.id LIMIT $5`,
        [topic, after.toString(), upTo.toString(), keys ? [...keys] : null, limit],
      );
      return res.rows.map(storedEventOf);
    },
    watch: (wake) => db.listen(OUTBOX_CHANNEL, () => wake()),
    horizon: (topic) => outboxHorizon(db, topic),
  };
}

const PAGE = 500;
/** Events past their age in memory are dropped in batches of at least this many (or half of what is kept). */
const AGE_TRIM_BATCH = 256;
const CURSOR = /^\d{1,19}$/;
/** Event ids are int8: a cursor beyond this names no event that can ever exist. */
const MAX_CURSOR = 2n ** 63n - 1n;

function isCursor(value: unknown): value is string {
  return typeof value === 'string' && CURSOR.test(value);
}

/** Whether a value could name an event of the log: an int8 id as decimal text. */
export function isEventCursor(value: unknown): value is string {
  return isCursor(value) && BigInt(value) <= MAX_CURSOR;
}

/**
 * Reads the event log (the outbox, or the stream it is relayed to) in id order and fans events out to
 * in-process streams. The log wakes it (NOTIFY, a stream message); a slow poll covers a lost wake. A
 * stream that starts with `after` replays (after, L] from the log and takes live events > L, where L is
 * the hub's position at the instant it registered: no gap, no duplicate. Cursors are checked against the
 * outbox itself, which is ahead of any relayed log.
 *
 * The newest events it read (every topic, `recent` of them, 10,000 by default, read within `recentAgeMs`,
 * five minutes by default) stay in memory: a replay that falls inside them (a socket that dropped and came
 * back) is served from there without reading the log. A replay from further back reads the log.
 * The age bound makes what is kept reach its steady size within minutes at any event rate; the count alone
 * would take as long as twice that many events take to come (19 minutes at 18 events a second).
 */
export class EventHub {
  private position = 0n;
  /**
   * Streams by what they listen to: a topic (every event of it), or a topic and one key (a stream that
   * filters by keys is under each of its keys). An event reaches only the streams it matches, however
   * many others filter on other keys.
   */
  private readonly listeners = new Map<string, Set<Listener>>();
  /** Listeners of every event, in id order (the gateway's state cache). */
  private readonly taps = new Set<Listener>();
  private pumping: Promise<void> | null = null;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private closed = false;

  private readonly pollMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly log: EventLog;
  /** The newest events read, in id order: every event with an id in (recentFrom, position] is here. */
  private recent: StoredEvent[] = [];
  /** When each of `recent` was read (`now()`), oldest first. */
  private recentReadAt: number[] = [];
  private recentFrom = 0n;
  private readonly recentSize: number;
  private readonly recentAgeMs: number;
  private readonly now: () => number;

  constructor(
    private readonly db: Database,
    options: {
      pollMs?: number;
      /** A failed read of the log (the database away for a moment); the next wake or poll retries. */
      onError?: (error: unknown) => void;
      /** Where events are read. @default the outbox table */
      log?: EventLog;
      /** How many of the newest events stay in memory to serve replays. @default 10000 */
      recent?: number;
      /** How long after it was read an event stays in memory to serve replays. @default 300000 */
      recentAgeMs?: number;
      now?: () => number;
    } = {},
  ) {
    this.pollMs = options.pollMs ?? 1000;
    this.recentSize = options.recent ?? 10_000;
    this.recentAgeMs = options.recentAgeMs ?? 300_000;
    this.now = options.now ?? (() => performance.now());
    this.onError = options.onError ?? (() => undefined);
    this.log = options.log ?? outboxLog(db);
  }

  async start(): Promise<void> {
    this.position = await this.log.newest();
    this.recentFrom = this.position;
    this.unlisten = await this.log.watch(() => void this.wake());
    this.timer = setInterval(() => void this.wake(), this.pollMs);
    this.timer.unref();
  }

  /** Hands every event read from now on to `listener`, in id order, before any stream gets it; returns a function that stops it. */
  tap(listener: (event: StoredEvent) => void): () => void {
    this.taps.add(listener);
    return () => void this.taps.delete(listener);
  }

  /** The id of the last event read from the outbox and handed to this hub's streams. */
  get delivered(): bigint {
    return this.position;
  }

  /** Events written to the outbox and not yet handed to this hub's streams (the outbox lag). */
  async lag(): Promise<bigint> {
    const newest = await this.newestWritten();
    return newest > this.position ? newest - this.position : 0n;
  }

  /** The newest event id in the outbox itself (ahead of a relayed log). */
  async newestWritten(): Promise<bigint> {
    const res = await this.db.query<{ max: string | null }>('SELECT max(id)::text AS max FROM outbox');
    return BigInt(res.rows[0]?.max ?? '0');
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.unlisten?.();
    await this.pumping;
  }

  /**
   * Reads what is new now (after a local commit, so local subscribers need not wait for NOTIFY). Never
   * rejects: a failed read is reported to `onError` and retried by the next wake or poll, from the same
   * position, so nothing is skipped.
   */
  wake(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.pumping) {
      this.again = true;
      return this.pumping;
    }
    this.pumping = this.pump()
      .catch((error: unknown) => {
        this.onError(error);
      })
      .finally(() => {
        this.pumping = null;
      });
    return this.pumping;
  }

  private async pump(): Promise<void> {
    do {
      this.again = false;
      for (;;) {
        const rows = await this.log.after(this.position, PAGE);
        const readAt = this.now();
        for (const event of rows) {
          this.position = BigInt(event.id);
          this.recent.push(event);
          this.recentReadAt.push(readAt);
          for (const tap of this.taps) tap(event);
          for (const listener of this.listeners.get(event.topic) ?? []) listener(event);
          if (event.key !== null) for (const listener of this.listeners.get(slotOf(event.topic, event.key)) ?? []) listener(event);
        }
        this.trimRecent(readAt);
        if (rows.length < PAGE || this.closed) break;
      }
    } while (this.again && !this.closed);
  }

  /**
   * Drops the oldest events kept: down to `recentSize` once twice as many are kept, and those read longer ago
   * than `recentAgeMs` once they are 256 or half of what is kept (one splice per batch, not one per event).
   */
  private trimRecent(now: number): void {
    let drop = this.recent.length > 2 * this.recentSize ? this.recent.length - this.recentSize : 0;
    const expired = firstAtOrAfter(this.recentReadAt, now - this.recentAgeMs);
    if (expired > 0 && expired >= Math.min(AGE_TRIM_BATCH, Math.ceil(this.recent.length / 2))) drop = Math.max(drop, expired);
    if (drop === 0) return;
    const dropped = this.recent.splice(0, drop);
    this.recentReadAt.splice(0, drop);
    this.recentFrom = BigInt(dropped[dropped.length - 1]!.id);
  }

  /**
   * A resume cursor as a subscription argument gives it: null when absent; refused (BAD_USER_INPUT naming
   * `field`) when it is not a cursor, or names an event beyond the newest one written, which a stream would
   * otherwise wait for silently, forever or until that many events exist.
   */
  async resumeCursor(after: unknown, topic: string, field = 'after'): Promise<string | null> {
    if (after === null || after === undefined) return null;
    const refuse = (message: string) => domainError('BAD_USER_INPUT', `${field}: ${message}`, [{ field, message }]);
    if (!isCursor(after) || BigInt(after) > MAX_CURSOR) throw refuse('must be a cursor from an earlier event (a whole number up to 9223372036854775807)');
    const cursor = BigInt(after);
    // The hub's position is a lower bound of the newest id; only a cursor beyond it needs the table.
    if (cursor > this.position) {
      const res = await this.db.query<{ max: string | null }>('SELECT max(id)::text AS max FROM outbox');
      const newest = BigInt(res.rows[0]?.max ?? '0');
      if (cursor > newest) throw refuse(`is beyond the newest event (${newest}): resume from a cursor this API returned`);
    }
    // Older than what the log keeps of this topic: said, never replayed with a gap.
    const horizon = await this.log.horizon(topic, this.position);
    if (cursor < horizon) throw cursorExpired(field, after, horizon.toString(), topic);
    return after;
  }

  /**
   * The events of a topic, replayed from `after` and then live, until the consumer calls `return()`.
   * Fails with StreamOverflowError when more than `maxQueued` events wait unread.
   */
  stream<P>(topic: string, options: StreamOptions): AsyncIterableIterator<StoredEvent<P>> {
    const keys = options.keys && options.keys.length > 0 ? new Set(options.keys) : null;
    const after = options.after ? BigInt(options.after) : null;
    const slots = keys ? [...keys].map((key) => slotOf(topic, key)) : [topic];
    const channel = new Channel<StoredEvent<P>>(
      () => {
        for (const slot of slots) {
          const set = this.listeners.get(slot);
          set?.delete(listener);
          if (set?.size === 0) this.listeners.delete(slot);
        }
      },
      options.maxQueued ?? 10_000,
      () => new StreamOverflowError(),
    );
    // While the replay is being read, live events are not held: only the newest id seen is kept, and
    // the replay goes on reading the table up to it. Memory stays bounded however long the catch-up.
    let catchingUp = after !== null;
    let newestSeen: bigint | null = null;
    // Every event reaches the channel through this one rule: what the viewer may see of it.
    const viewer = options.viewer;
    const deliver = (event: StoredEvent) => {
      const seen = eventSeenBy(event as StoredEvent<P>, viewer);
      if (seen) channel.push(seen);
    };
    const listener: Listener = (event) => {
      if (after !== null && BigInt(event.id) <= after) return;
      if (catchingUp) newestSeen = BigInt(event.id);
      else deliver(event);
    };
    // Registering and reading the position in one synchronous step: live delivery covers exactly
    // ids > registeredAt, the replay covers (after, registeredAt].
    for (const slot of slots) {
      let set = this.listeners.get(slot);
      if (!set) this.listeners.set(slot, (set = new Set()));
      set.add(listener);
    }
    const registeredAt = this.position;
    if (after !== null) {
      void (async () => {
        let from = after;
        let upTo = registeredAt;
        for (;;) {
          const fromLog = await this.replay({ topic, after: from, upTo, keys, channel, deliver });
          if (channel.closed) return;
          // Pruned between the cursor's check and this read: the gap is said (the stream ends expired).
          if (fromLog && from === after) {
            const horizon = await this.log.horizon(topic, this.position);
            if (after < horizon) return channel.fail(cursorExpired('after', after.toString(), horizon.toString(), topic));
          }
          // Synchronous with the last read: events after this point go live, none is missed or repeated.
          if (newestSeen === null || newestSeen <= upTo) {
            catchingUp = false;
            return;
          }
          from = upTo;
          upTo = newestSeen;
        }
      })().catch((error: unknown) => channel.fail(error));
    }
    return channel;
  }

  /** Replays (after, upTo] of a topic: from memory when it holds the range (false), else from the log (true). */
  private async replay<P>(range: ReplayRange<P>): Promise<boolean> {
    const { topic, after, upTo, keys, channel, deliver } = range;
    if (after >= this.recentFrom && upTo <= this.position) {
      await this.replayRecent(range);
      return false;
    }
    let from = after;
    while (from < upTo && !channel.closed) {
      const page = await this.log.topic(topic, from, upTo, keys, PAGE);
      for (const event of page) deliver(event);
      if (page.length < PAGE) break;
      from = BigInt(page[page.length - 1]!.id);
      // Read the next page only when the consumer has caught up: a long replay never floods memory.
      await channel.room(PAGE);
    }
    return true;
  }

  /** A replay of (after, upTo] from the events in memory, paced like one read from the log. */
  private async replayRecent<P>({ topic, after, upTo, keys, channel, deliver }: ReplayRange<P>): Promise<void> {
    // A copy of the range: the pump may trim `recent` while this waits for the consumer.
    const events = this.recent.slice(firstAfter(this.recent, after), firstAfter(this.recent, upTo));
    let pushed = 0;
    for (const event of events) {
      if (channel.closed) return;
      if (event.topic !== topic || (keys && (event.key === null || !keys.has(event.key)))) continue;
      deliver(event);
      if (++pushed % PAGE === 0) await channel.room(PAGE);
    }
  }
}

/**
 * A resume cursor older than the events kept: CURSOR_EXPIRED (410 in the catalogue), naming the oldest cursor
 * from which the stream is whole. The client reloads its state and subscribes from there, or from now.
 */
function cursorExpired(field: string, cursor: string, oldest: string, topic: string): GraphQLError {
  return new GraphQLError(
    `${field}: cursor ${cursor} is older than the ${topic} events kept (retention): the oldest cursor to resume from is ${oldest}; reload the state and subscribe from there or from now`,
    { extensions: { code: 'CURSOR_EXPIRED', oldestCursor: oldest, fields: [{ field, message: `expired; the oldest cursor still available is ${oldest}` }] } },
  );
}

/** One stretch of a replay: the events of `topic` (of `keys`) in (after, upTo], each handed to `deliver`. */
interface ReplayRange<P> {
  topic: string;
  after: bigint;
  upTo: bigint;
  keys: Set<string> | null;
  channel: Channel<StoredEvent<P>>;
  deliver: (event: StoredEvent) => void;
}

/** Where a stream filtering on `key` of `topic` listens (a topic name holds no NUL). */
const slotOf = (topic: string, key: string) => `${topic}\u0000${key}`;

/** The first index of `events` (in id order) whose id is above `after`. */
function firstAfter(events: readonly StoredEvent[], after: bigint): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (BigInt(events[mid]!.id) > after) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The index of the first time at or after `from` in ascending `times` (their length when none is). */
function firstAtOrAfter(times: readonly number[], from: number): number {
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (times[mid]! >= from) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Maps stored events to a subscription field's payloads; `until` ends the stream after a final event (a
 * delivery that completed, a session that closed), returning the source so its listener is released.
 */
export function mapEvents<P, R>(
  source: AsyncIterableIterator<StoredEvent<P>>,
  map: (event: StoredEvent<P>) => R,
  until: (event: StoredEvent<P>) => boolean = () => false,
): AsyncIterableIterator<R> {
  let ended = false;
  const iterator: AsyncIterableIterator<R> = {
    async next() {
      if (ended) return { value: undefined, done: true };
      const item = await source.next();
      if (item.done) return { value: undefined, done: true };
      if (until(item.value)) {
        ended = true;
        await source.return?.();
      }
      return { value: map(item.value), done: false };
    },
    async return() {
      ended = true;
      await source.return?.();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
