import type { Connection, Stream } from '../connection.js';
import { BONDING_CURSOR, BONDING_EVENTS, BONDING_SNAPSHOT } from '../documents.js';
import { label, token } from '../dom.js';
import type { BondingPanel } from '../panels/bonding.js';
import type { FeedPanel } from '../panels/feed.js';
import { bondingCursor, bondingEvent, bondingSnapshot, type BondingEvent } from '../schemas.js';
import { observeServerTime } from '../server-time.js';
import { Source } from './source.js';

/** Open sessions followed at once (each steps every BONDING_TICK_MS, one event per step). */
const MAX_FOLLOWED = 4;
const POLL_MS = 10_000;

/**
 * The bonding subgraph's part. There is no stream of new sessions, so the session list is read every
 * 10 s (cursor first, then the list); each open session in it is followed by its own stream from that
 * cursor until it closes.
 */
export class BondingSource extends Source {
  private readonly followed = new Map<string, Stream>();

  constructor(
    connection: Connection,
    note: HTMLElement,
    private readonly panel: BondingPanel,
    private readonly feed: FeedPanel,
  ) {
    super(connection, note, POLL_MS, ['bonding:use']);
  }

  protected load(): Promise<string[]> {
    return this.refresh();
  }

  protected override async refresh(): Promise<string[]> {
    const { data: cursor } = await this.connection.query(BONDING_CURSOR, (d) => bondingCursor.parse(d));
    const { data, errors } = await this.connection.query(BONDING_SNAPSHOT, (d) => bondingSnapshot.parse(d));
    this.panel.load(data);
    for (const session of data.bondingSessions) {
      if (session.state === 'CLOSED' || this.followed.has(session.id) || this.followed.size >= MAX_FOLLOWED) continue;
      const id = session.id;
      this.followed.set(
        id,
        this.connection.stream({
          query: BONDING_EVENTS,
          variables: { sessionId: id },
          after: cursor.bondingEventCursor,
          parse: (d) => bondingEvent.parse(d).bondingSessionUpdated,
          cursorOf: (e) => e.cursor,
          onEvent: (e) => this.event(e),
          onEnd: () => this.followed.delete(id),
          onError: () => this.followed.delete(id),
        }),
      );
    }
    return errors;
  }

  private event(e: BondingEvent): void {
    observeServerTime(e.at);
    this.panel.apply(e);
    // Every step is a METRICS event; the feed shows what changes a session.
    if (e.kind === 'METRICS') return;
    this.feed.add({
      cursor: e.cursor,
      stream: 'bonding',
      source: 'bonding',
      at: e.at,
      title: `${e.sessionId} ${e.previousState ? `${label(e.previousState)} → ` : ''}${label(e.state)}`,
      detail: e.reason,
      tone: token(e.state),
      data: { session: e.sessionId },
    });
  }
}
