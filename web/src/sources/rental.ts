import type { Connection, Stream } from '../connection.js';
import { BOOKING, FLEET_EVENTS, MACHINE_EVENTS, RENTAL_CURSOR, RENTAL_SNAPSHOT, TRACKING_EVENTS } from '../documents.js';
import { clock, label, minutes, token } from '../dom.js';
import type { ChartPanel } from '../panels/chart.js';
import { isActive, type DeliveriesPanel } from '../panels/deliveries.js';
import type { FeedPanel } from '../panels/feed.js';
import type { FleetPanel } from '../panels/fleet.js';
import { bookingAnswer, fleetEvent, machineEvent, rentalCursor, rentalSnapshot, trackingEvent, type MachineEvent, type TrackingEvent } from '../schemas.js';
import { observeServerTime } from '../server-time.js';
import { Source } from './source.js';

interface Panels {
  fleet: FleetPanel;
  chart: ChartPanel;
  deliveries: DeliveriesPanel;
  feed: FeedPanel;
}

/** Deliveries followed at once (one trackingUpdated stream each). */
const MAX_TRACKED = 20;

/**
 * The rental subgraph's part, with the prediction subgraph's forecasts joined in: the event cursor, then
 * the snapshot (machines, fleet summary, map places, newest bookings), then the machine, fleet and
 * tracking streams from that cursor, so no change between the snapshot and the streams is lost.
 */
export class RentalSource extends Source {
  private readonly tracked = new Map<string, Stream>();
  /** The last tracking status shown in the feed, per booking (positions move every tick; the feed shows changes). */
  private readonly lastStatus = new Map<string, string>();

  constructor(
    connection: Connection,
    note: HTMLElement,
    private readonly panels: Panels,
  ) {
    super(connection, note, null, ['fleet:read', 'rental:read']);
  }

  protected async load(): Promise<string[]> {
    const { data: cursor } = await this.connection.query(RENTAL_CURSOR, (d) => rentalCursor.parse(d));
    const after = cursor.eventCursor;
    const { data, errors } = await this.connection.query(RENTAL_SNAPSHOT, (d) => rentalSnapshot.parse(d));
    this.panels.fleet.load(data.machines);
    this.panels.chart.load(data.fleetSummary);
    this.panels.deliveries.places(data.depots, data.locations);
    for (const { node } of data.bookings.edges) {
      if (!isActive(node)) continue;
      this.panels.deliveries.upsert(node);
      this.lastStatus.set(node.id, node.tracking.status);
      this.track(node.id, after);
    }
    this.connection.stream({
      query: MACHINE_EVENTS,
      after,
      parse: (d) => machineEvent.parse(d).machineStatusChanged,
      cursorOf: (e) => e.cursor,
      onEvent: (e) => this.machine(e),
      onError: (message) =>
        this.panels.feed.add({ cursor: '', stream: 'error', source: 'rental', at: new Date().toISOString(), title: 'machine stream refused', detail: message }),
    });
    this.connection.stream({
      query: FLEET_EVENTS,
      after,
      parse: (d) => fleetEvent.parse(d).fleetSummaryChanged,
      cursorOf: (e) => e.cursor,
      onEvent: (e) => {
        observeServerTime(e.at);
        this.panels.chart.apply(e);
      },
    });
    return errors;
  }

  private machine(e: MachineEvent): void {
    observeServerTime(e.at);
    this.panels.fleet.apply(e);
    const about = e.bookingId ? `booking ${e.bookingId}` : e.quoteId ? `quote ${e.quoteId.slice(0, 8)}` : '';
    this.panels.feed.add({
      cursor: e.cursor,
      stream: 'machines',
      source: 'rental',
      at: e.at,
      title: `${e.machine.id} ${label(e.previousStatus)} → ${label(e.status)}`,
      detail: `${label(e.reason)}${about ? ` · ${about}` : ''}`,
      tone: token(e.status),
      data: { machine: e.machine.id, status: token(e.status), reason: token(e.reason) },
    });
    if (e.reason === 'CONFIRM' && e.bookingId) this.delivery(e.bookingId, e.cursor);
    if (e.reason === 'COMPLETE' && e.bookingId) {
      this.tracked.get(e.bookingId)?.close();
      this.tracked.delete(e.bookingId);
      this.panels.deliveries.remove(e.bookingId);
    }
  }

  /** A new booking: its tracking stream from the confirmation's cursor, and its delivery (with the forecast). */
  private delivery(bookingId: string, after: string): void {
    if (this.tracked.has(bookingId)) return;
    this.track(bookingId, after);
    void this.fetchBooking(bookingId);
  }

  private readonly fetching = new Set<string>();

  /** Reads a booking's delivery; when the socket drops meanwhile, the booking's next tracking event asks again. */
  private async fetchBooking(bookingId: string): Promise<void> {
    if (this.fetching.has(bookingId)) return;
    this.fetching.add(bookingId);
    try {
      const { data } = await this.connection.query(BOOKING, (d) => bookingAnswer.parse(d), { id: bookingId });
      if (data.booking) {
        this.lastStatus.set(bookingId, data.booking.tracking.status);
        this.panels.deliveries.upsert(data.booking);
      }
    } catch {
      // Asked again at the next tracking event.
    } finally {
      this.fetching.delete(bookingId);
    }
  }

  private track(bookingId: string, after: string): void {
    if (this.tracked.has(bookingId) || this.tracked.size >= MAX_TRACKED) return;
    const stream = this.connection.stream({
      query: TRACKING_EVENTS,
      variables: { bookingId },
      after,
      parse: (d) => trackingEvent.parse(d).trackingUpdated,
      cursorOf: (e) => e.cursor,
      onEvent: (e) => this.tracking(e),
      onEnd: () => {
        this.tracked.delete(bookingId);
        this.panels.deliveries.remove(bookingId);
      },
      onError: () => this.tracked.delete(bookingId),
    });
    this.tracked.set(bookingId, stream);
  }

  private tracking(e: TrackingEvent): void {
    observeServerTime(e.at);
    if (this.panels.deliveries.has(e.bookingId)) this.panels.deliveries.track(e);
    else void this.fetchBooking(e.bookingId);
    if (this.lastStatus.get(e.bookingId) === e.status) return;
    this.lastStatus.set(e.bookingId, e.status);
    this.panels.feed.add({
      cursor: e.cursor,
      stream: 'tracking',
      source: 'rental',
      at: e.at,
      title: `${e.bookingId} ${label(e.status)}`,
      detail: e.status === 'ON_SITE' || e.status === 'COMPLETED' ? undefined : `ETA ${clock(e.eta)} · ${minutes(e.minutesRemaining)}`,
      tone: token(e.status),
      data: { booking: e.bookingId },
    });
  }
}
