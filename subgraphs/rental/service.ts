import { createHash } from 'node:crypto';
import type { GraphQLError } from 'graphql';
import { domainError } from '../../platform/errors.js';
import type { Owner, Viewer } from '../../platform/ownership.js';
import { validUntil } from '../../platform/state-trace.js';
import { PRICING, closeBill, deliveryRuns, priceQuote } from './pricing.js';
import {
  effectiveQuoteStatus,
  quoteStatusHoldsUntil,
  reservationsHoldUntil,
  type BookingRecord,
  type FleetSummaryRecord,
  type MachineRecord,
  type Place,
  type QuoteRecord,
  type QuoteStatus,
} from './records.js';
import type { PublicJwk, QuoteSigner } from './signing.js';
import type { RentalStore, TrackedBooking } from './store.js';
import {
  DELIVERY,
  dueTrackingEvents,
  earliestStart,
  legState,
  needsForecast,
  planLegs,
  promiseDeparture,
  quotedForecast,
  reforecastLeg,
  reforecastRun,
  trackingHoldsUntil,
  trackingPayload,
  trackingState,
  type PlannedLeg,
  type QuotedRun,
  type Run,
  type TrackingState,
} from './tracking.js';
import type { TravelForecaster } from './travel.js';

/*
 * The rental rules: what a quote costs and when it may start, how a booking is confirmed, billed and
 * tracked. Resolvers call this service; it reads and writes through the store (subgraphs/rental/store.ts),
 * which holds the SQL and runs each state change as one transaction, the rules handed to it where they
 * must be applied inside that transaction (a quote priced from the fleet as its reservation leaves it).
 */

export interface RentalServiceOptions {
  /** Lifetime of a quote and of its reservations. */
  quoteTtlSeconds: number;
  /** How often a booking in transit publishes its position. */
  trackingTickMs: number;
  /** Travel forecasts of truck runs (prediction's model, the rule while it cannot answer). */
  forecast: TravelForecaster;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class RentalService {
  constructor(
    private readonly store: RentalStore,
    private readonly signer: QuoteSigner,
    private readonly options: RentalServiceOptions,
  ) {}

  // ---- reads: expired quotes are released first wherever reservations show -----------------------
  // A read that depends on the clock says until when its answer holds (platform/state-trace.ts, `validUntil`).

  /** The fleet's machines as of `now`, expired quotes released: it holds until the earliest of their reservations expires. */
  async machines(now: Date): Promise<MachineRecord[]> {
    const machines = await this.store.machines(now);
    validUntil(reservationsHoldUntil(machines));
    return machines;
  }

  /** The fleet's summary as of `now`, expired quotes released (RentalStore.fleetSummary): it holds until the earliest reservation expires. */
  async fleetSummary(now: Date): Promise<FleetSummaryRecord> {
    const { summary, reservedUntil } = await this.store.fleetSummary(now);
    validUntil(reservedUntil);
    return summary;
  }

  /**
   * A machine as of `now`, read by `load` (the request's loader; read again after a release): a
   * reservation past its expiry is released first. It holds until its reservation expires.
   */
  async machineAsOf(load: () => Promise<MachineRecord | null>, now: Date): Promise<MachineRecord | null> {
    let machine = await load();
    if (machine?.reservedUntil && machine.reservedUntil.getTime() <= now.getTime()) {
      await this.store.releaseDue(now);
      machine = await load();
    }
    validUntil(machine ? reservationsHoldUntil([machine]) : null);
    return machine;
  }

  /**
   * A quote as of `now`, read by `load` (the request's loader; read again after a release): past its
   * expiry, it is released first, so its machines read available. It holds until it expires.
   */
  async quoteAsOf(load: () => Promise<QuoteRecord | null>, now: Date): Promise<QuoteRecord | null> {
    let quote = await load();
    if (quote?.status === 'active' && quote.expiresAt.getTime() <= now.getTime()) {
      await this.store.releaseDue(now);
      quote = await load();
    }
    validUntil(quote ? quoteStatusHoldsUntil(quote, now) : null);
    return quote;
  }

  /** A quote's status as of `now` (expired once past its expiry, released or not): it holds until the quote expires. */
  quoteStatus(quote: QuoteRecord, now: Date): QuoteStatus {
    validUntil(quoteStatusHoldsUntil(quote, now));
    return effectiveQuoteStatus(quote, now);
  }

  /** Releases the machines of every quote past its expiry (the sweeper). */
  releaseExpired(now: Date): Promise<number> {
    return this.store.releaseExpired(now);
  }

  locations(): Place[] {
    return this.store.locations();
  }

  depots(): Place[] {
    return this.store.depots();
  }

  depot(id: string): Place | null {
    return this.store.depot(id);
  }

  location(id: string): Place | null {
    return this.store.location(id);
  }

  bookingsPage(first: number, beforeSeq: string | null, viewer: Viewer) {
    return this.store.bookingsPage(first, beforeSeq, viewer);
  }

  bookingsTotal(viewer: Viewer): Promise<number> {
    return this.store.bookingsTotal(viewer);
  }

  machinesByIds(ids: readonly string[]): Promise<MachineRecord[]> {
    return this.store.machinesByIds(ids);
  }

  /** The quotes of these ids the viewer may see (another tenant's are left out, as unknown ids). */
  quotesByIds(ids: readonly string[], viewer: Viewer): Promise<QuoteRecord[]> {
    return this.store.quotesByIds(ids, viewer);
  }

  /** The bookings of these ids the viewer may see. */
  bookingsByIds(ids: readonly string[], viewer: Viewer): Promise<BookingRecord[]> {
    return this.store.bookingsByIds(ids, viewer);
  }

  /** The bookings the viewer may see that confirmed these quotes. */
  bookingsByQuoteIds(quoteIds: readonly string[], viewer: Viewer): Promise<BookingRecord[]> {
    return this.store.bookingsByQuoteIds(quoteIds, viewer);
  }

  /** The public keys that verify quote signatures (a JWKS). */
  async signingKeys(): Promise<PublicJwk[]> {
    return (await this.signer.jwks()).keys;
  }

  eventCursor(): Promise<string> {
    return this.store.eventCursor();
  }

  /** A booking's delivery as of `now`: it holds one tracker tick, never past a leg's next change of status. */
  tracking(booking: BookingRecord, now: Date): TrackingState {
    const completed = booking.status === 'completed';
    validUntil(trackingHoldsUntil(booking.legs, now, this.options.trackingTickMs, completed));
    return trackingState(booking.legs, this.store.trackingPlaces(booking.locationId), now, completed);
  }

  // ---- quotes and bookings -----------------------------------------------------------------------

  /**
   * A signed quote reserving the machines. Its site and machines are checked, and its truck runs forecast,
   * before any transaction (no transaction waits on the prediction subgraph); the start must leave the
   * machines time to be on site. The price is made inside the reservation's transaction.
   */
  async createQuote(input: {
    machineIds: string[];
    locationId: string;
    startTime: Date;
    durationHours: number;
    now: Date;
    owner: Owner;
  }): Promise<QuoteRecord> {
    const { now } = input;
    await this.store.releaseExpired(now);
    const site = this.store.location(input.locationId);
    if (!site) {
      throw domainError('BAD_USER_INPUT', `Unknown location "${input.locationId}"`, [
        { field: 'locationId', message: `unknown location "${input.locationId}"` },
      ]);
    }
    const machines = await this.store.catalogue(input.machineIds);
    const unknown = input.machineIds.filter((id) => !machines.some((m) => m.id === id));
    if (unknown.length > 0) {
      throw domainError('BAD_USER_INPUT', `Unknown machine${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`, [
        { field: 'machineIds', message: `unknown machine ids: ${unknown.join(', ')}` },
      ]);
    }
    // A rental starts when its machines can be on site: trucks leave when the booking is confirmed, at the
    // latest when this quote expires; each run is forecast for that departure.
    const expiresAt = new Date(now.getTime() + this.options.quoteTtlSeconds * 1000);
    const runs = deliveryRuns(machines, site);
    const departAt = promiseDeparture(expiresAt);
    const travel = await this.options.forecast(runs.map((r) => ({ distanceKm: r.distanceKm, departAt })));
    const quoted: QuotedRun[] = runs.map((r, i) => ({ ...r, travel: travel[i]! }));
    const earliest = earliestStart(quoted, expiresAt);
    if (input.startTime.getTime() < earliest.getTime()) throw startTooEarly(quoted, earliest);
    return this.store.reserveQuote({
      machineIds: input.machineIds,
      now,
      owner: input.owner,
      terms: async (quoteId, machineIds, countsAfter) => {
        const price = priceQuote({ machines, site, startTime: input.startTime, durationHours: input.durationHours, countsAfter, pricedAt: now });
        const signature = await this.signer.sign({
          quote_id: quoteId,
          machine_ids: machineIds,
          location_id: site.id,
          total: price.totalCents / 100,
          currency: PRICING.currency,
          iat: Math.floor(now.getTime() / 1000),
          exp: Math.floor(expiresAt.getTime() / 1000),
        });
        return {
          locationId: site.id,
          startTime: input.startTime,
          durationHours: input.durationHours,
          utilization: price.utilization,
          surgeMultiplier: price.surgeMultiplier,
          leadTimeHours: price.leadTimeHours,
          leadTimeFactor: price.leadTimeFactor,
          lineItems: price.lineItems,
          deliveries: price.deliveries.map((d, i) => ({ ...d, travel: quoted[i]!.travel })),
          subtotalCents: price.subtotalCents,
          deliveryCents: price.deliveryCents,
          totalCents: price.totalCents,
          currency: PRICING.currency,
          signature,
          expiresAt,
        };
      },
    });
  }

  /**
   * Confirms a quote into a booking (subgraphs/rental/store.ts, `confirmQuote`, says how a repeated
   * Idempotency-Key and a second confirm are answered). The delivery plan is forecast before the
   * transaction, from the quote's fixed terms; the transaction decides whether this request confirms it.
   */
  async confirmBooking(input: { quoteId: string; customerName: string; idempotencyKey: string | null; now: Date; viewer: Viewer }): Promise<BookingRecord> {
    const { now, quoteId, viewer } = input;
    const fingerprint = confirmFingerprint(input);
    if (!UUID_RE.test(quoteId)) {
      throw domainError('BAD_USER_INPUT', `quoteId must be a UUID, got "${quoteId}"`, [{ field: 'quoteId', message: 'must be a UUID' }]);
    }
    await this.store.releaseExpired(now);
    const terms = await this.store.activeQuoteTerms(quoteId, viewer);
    const planned = terms
      ? await planLegs({ runs: terms.deliveries, confirmedAt: now, startTime: terms.startTime, expiresAt: terms.expiresAt, forecast: this.options.forecast })
      : null;
    return this.store.confirmQuote({
      ...input,
      fingerprint,
      planned,
      tracking: (bookingId, legs, locationId) => {
        const state = trackingState(legs, this.store.trackingPlaces(locationId), now, false);
        return { status: state.status, payload: trackingPayload(bookingId, state, now) };
      },
    });
  }

  /** Completes a booking: billed by the quarter hour actually used, never below the hours quoted. */
  completeBooking(input: { bookingId: string; now: Date; viewer: Viewer }): Promise<BookingRecord> {
    const { now } = input;
    return this.store.completeBooking({
      ...input,
      close: (current) =>
        closeBill({
          quotedHours: current.durationHours,
          subtotalCents: current.subtotalCents,
          totalCents: current.quotedCents,
          rentalStart: new Date(Math.max(current.startTime.getTime(), current.confirmedAt.getTime())),
          completedAt: now,
        }),
      tracking: (booking) => trackingPayload(booking.id, trackingState(booking.legs, this.store.trackingPlaces(booking.locationId), now, true), now),
    });
  }

  // ---- tracking ----------------------------------------------------------------------------------

  /**
   * Publishes what is due for every booking on its way: status changes and in-transit positions. Each
   * is claimed conditionally (subgraphs/rental/store.ts, `claimTracking`), so one instance publishes it.
   */
  async publishTracking(now: Date): Promise<number> {
    let active = await this.store.activeTrackedBookings();
    let published = 0;
    const reforecast = await this.reforecastRuleLegs(active, now);
    if (reforecast.changed > 0) active = await this.store.activeTrackedBookings();
    published += reforecast.published;
    for (const booking of active) {
      const due = dueTrackingEvents({
        bookingId: booking.id,
        legs: booking.legs,
        places: this.store.trackingPlaces(booking.locationId),
        published: { status: booking.trackingStatus, at: booking.trackingAt },
        now,
        tickMs: this.options.trackingTickMs,
      });
      if (due.events.length === 0) continue;
      if (await this.store.claimTracking(booking, due.status, due.events, now)) published += due.events.length;
    }
    return published;
  }

  /**
   * Runs planned by the rule while prediction could not answer, forecast again once it answers (before
   * departure for the whole road, on the road for the distance left): the stored plan takes the model's
   * arrival, and a tracking update carries the new ETA and its source. Conditional on the plan read, so
   * one instance rewrites each plan.
   */
  private async reforecastRuleLegs(bookings: readonly TrackedBooking[], now: Date): Promise<{ changed: number; published: number }> {
    const asks: { booking: TrackedBooking; leg: PlannedLeg; run: Run }[] = [];
    for (const booking of bookings) {
      const places = this.store.trackingPlaces(booking.locationId);
      for (const leg of booking.legs) {
        if (!needsForecast(leg, now)) continue;
        const state = legState(leg, places.depot(leg.depotId), places.site, now, false);
        asks.push({ booking, leg, run: reforecastRun(leg, state, now) });
      }
    }
    if (asks.length === 0) return { changed: 0, published: 0 };
    const forecasts = await this.options.forecast(asks.map((a) => a.run));
    // The legs the model answered for, forecast again.
    const replanned = new Map<PlannedLeg, PlannedLeg>();
    asks.forEach((a, i) => {
      const forecast = forecasts[i];
      if (forecast?.source === 'model') replanned.set(a.leg, reforecastLeg(a.leg, a.run, forecast));
    });
    let changed = 0;
    let published = 0;
    for (const booking of new Set(asks.map((a) => a.booking))) {
      if (!booking.legs.some((leg) => replanned.has(leg))) continue;
      const legs = booking.legs.map((leg) => replanned.get(leg) ?? leg);
      const state = trackingState(legs, this.store.trackingPlaces(booking.locationId), now, false);
      // An update in the status last published; a status the plan has moved on to is announced, with
      // the new ETA, by its own transition event.
      const announce = state.status === booking.trackingStatus;
      if (await this.store.replanLegs(booking, legs, announce ? trackingPayload(booking.id, state, now) : null, now)) {
        changed += 1;
        if (announce) published += 1;
      }
    }
    return { changed, published };
  }
}

/** A confirm's payload as an Idempotency-Key remembers it: SHA-256 of its normalized fields. */
function confirmFingerprint(input: { quoteId: string; customerName: string }): string {
  return createHash('sha256')
    .update(JSON.stringify(['confirmBooking', input.quoteId, input.customerName]), 'utf8')
    .digest('hex');
}

/** A start before the machines can be on site: 400, stating the earliest start and what it is made of. */
function startTooEarly(runs: readonly QuotedRun[], earliest: Date): GraphQLError {
  const slowest = runs.reduce((a, b) => (quotedForecast(b).q90 > quotedForecast(a).q90 ? b : a));
  const travel = quotedForecast(slowest);
  const road =
    travel.source === 'model'
      ? `${Math.round(travel.q90)} min on the road from ${slowest.depotId} at the travel model's q90`
      : `${Math.round(travel.q90)} min on the road from ${slowest.depotId} at 45 km/h, the rule used while prediction cannot answer`;
  const why =
    `its machines can be on site no earlier (dispatched when the booking is confirmed, at the latest when the quote ` +
    `expires, then ${DELIVERY.loadingMinutes} min loading and ${road})`;
  return domainError('BAD_USER_INPUT', `The rental cannot start before ${earliest.toISOString()}: ${why}`, [
    { field: 'startTime', message: `must be at or after ${earliest.toISOString()}: ${why}` },
  ]);
}
