import DataLoader from 'dataloader';
import type { GraphQLResolverMap } from '@apollo/subgraph/dist/schema-helper/index.js';
import type { Clock } from '../../platform/clock.js';
import { domainError } from '../../platform/errors.js';
import { mapEvents, type EventHub, type StoredEvent } from '../../platform/event-hub.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { invalidInput, parseInput } from '../../platform/validate.js';
import {
  START_TIME_WINDOW,
  bookingIdArg,
  bookingsPageArgs,
  confirmBookingInput,
  createQuoteInput,
  bookingIdRef,
  idArg,
  idempotencyKey,
  machineIdArg,
  machineIdsFilter,
  quoteIdArg,
  quoteIdRef,
} from './inputs.js';
import type { DeliveryCharge, LineItem } from './pricing.js';
import {
  effectiveQuoteStatus,
  type BookingRecord,
  type FleetSummaryRecord,
  type MachineRecord,
  type Place,
  type QuoteRecord,
} from './records.js';
import type { QuoteSigner } from './signing.js';
import { TOPICS, type MachineStatusEvent, type RentalStore, type Viewer } from './store.js';
import { isOperator, mayActFor, type Principal } from '../../platform/principal.js';
import { criticalLeg, earliestStart, trackingState, type LegState, type TrackingEventPayload, type TrackingState } from './tracking.js';

export interface RentalContext {
  store: RentalStore;
  signer: QuoteSigner;
  events: EventHub;
  clock: Clock;
  /**
   * One instant per request, so every field of an answer agrees on expiry and tracking. A subscription
   * renews it, and the loaders, for each event it delivers.
   */
  now: Date;
  /** The raw Idempotency-Key header, validated where it is used. */
  idempotencyKey: string | undefined;
  /** Who the request acts for; its tenant's quotes and bookings are all it sees (every tenant's for an operator). */
  principal: Principal;
  loaders: ReturnType<typeof createLoaders>;
}

/** The quotes and bookings a principal may see: its tenant's, or all of them for an operator. */
export const viewerOf = (principal: Principal): Viewer => ({ tenant: isOperator(principal) ? null : principal.tenant });

/**
 * Per-request loaders. Quotes and bookings of another tenant load as null, exactly as an unknown id, so
 * every path that reaches one (a root field, an entity reference, a subscription) answers as for nothing.
 */
export function createLoaders(store: RentalStore, principal: Principal) {
  const visible = <T extends { tenant: string }>(row: T | undefined) => (row && mayActFor(principal, row.tenant) ? row : null);
  const byId = <T extends { id: string }>(fetch: (ids: readonly string[]) => Promise<T[]>, keep: (row: T | undefined) => T | null = (r) => r ?? null) =>
    new DataLoader<string, T | null>(async (ids) => {
      const rows = new Map((await fetch(ids)).map((r) => [r.id, r]));
      return ids.map((id) => keep(rows.get(id)));
    });
  return {
    machine: byId((ids) => store.machinesByIds(ids)),
    quote: byId((ids) => store.quotesByIds(ids), visible),
    booking: byId((ids) => store.bookingsByIds(ids), visible),
    bookingByQuote: new DataLoader<string, BookingRecord | null>(async (quoteIds) => {
      const rows = new Map((await store.bookingsByQuoteIds(quoteIds)).map((b) => [b.quoteId, b]));
      return quoteIds.map((id) => visible(rows.get(id)));
    }),
  };
}

const must = <T>(value: T | null | undefined, what: string): T => {
  if (value === null || value === undefined) throw new Error(`${what} is missing`);
  return value;
};
const euros = (cents: number) => cents / 100;
const upper = (s: string) => s.toUpperCase();
const coordinates = (p: { latitude: number; longitude: number }) => ({ latitude: p.latitude, longitude: p.longitude });
const machinesOf = async (ids: string[], ctx: RentalContext) =>
  (await ctx.loaders.machine.loadMany(ids)).map((m, i) => {
    if (m instanceof Error) throw m;
    return must(m, `machine ${ids[i]}`);
  });
const cursorOf = (seq: string) => Buffer.from(`booking:${seq}`).toString('base64url');
function seqOfCursor(cursor: string): string {
  // Only the exact text this API hands out: no leading zeros, no other spelling of the same bytes.
  const match = /^booking:([1-9]\d{0,17})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || cursorOf(match[1]!) !== cursor) throw invalidInput([{ field: 'after', message: 'is not a cursor returned by this API' }]);
  return match[1]!;
}

/** The leg that arrives last: the booking is on site when it is. */
const lastLeg = (b: BookingRecord) => criticalLeg(b.legs);

interface TrackingView {
  booking: BookingRecord;
  state: TrackingState;
  computedAt: Date;
}

function trackingOf(booking: BookingRecord, ctx: RentalContext): TrackingView {
  const places = ctx.store.trackingPlaces(booking.locationId);
  const state = trackingState(booking.legs, places, ctx.now, booking.status === 'completed');
  return { booking, state, computedAt: ctx.now };
}

type Resolvers = Record<string, object>;

/** Fresh time and loaders for one subscription event: a long-lived context must not serve stale rows. */
function renew(ctx: RentalContext): void {
  ctx.now = ctx.clock.now();
  ctx.loaders = createLoaders(ctx.store, ctx.principal);
}

interface MachineStatusView extends MachineStatusEvent {
  cursor: string;
}

export const rentalResolvers = {
  DateTime: DateTimeScalar,
  Query: {
    machines: async (_: unknown, __: unknown, ctx: RentalContext) => {
      await ctx.store.releaseExpired(ctx.now);
      return ctx.store.machines();
    },
    machine: async (_: unknown, args: { id: string }, ctx: RentalContext) => {
      const id = parseInput(machineIdArg, args.id, 'id');
      await ctx.store.releaseExpired(ctx.now);
      return ctx.loaders.machine.load(id);
    },
    locations: (_: unknown, __: unknown, ctx: RentalContext) => ctx.store.locations(),
    depots: (_: unknown, __: unknown, ctx: RentalContext) => ctx.store.depots(),
    fleetSummary: async (_: unknown, __: unknown, ctx: RentalContext) => {
      await ctx.store.releaseExpired(ctx.now);
      return ctx.store.fleetSummary();
    },
    quote: async (_: unknown, args: { id: string }, ctx: RentalContext) => {
      const id = parseInput(quoteIdArg, args.id, 'id');
      await ctx.store.releaseExpired(ctx.now);
      return ctx.loaders.quote.load(id);
    },
    booking: (_: unknown, args: { id: string }, ctx: RentalContext) => ctx.loaders.booking.load(parseInput(bookingIdArg, args.id, 'id')),
    bookings: async (_: unknown, args: { first: number; after?: string | null }, ctx: RentalContext) => {
      const { first, after } = parseInput(bookingsPageArgs, args);
      const page = await ctx.store.bookingsPage(first, after === null || after === undefined ? null : seqOfCursor(after), viewerOf(ctx.principal));
      for (const b of page.rows) ctx.loaders.booking.prime(b.id, b);
      const edges = page.rows.map((node) => ({ cursor: cursorOf(node.seq), node }));
      return {
        edges,
        pageInfo: { hasNextPage: page.hasNext, endCursor: edges.at(-1)?.cursor ?? null },
        totalCount: page.total,
      };
    },
    tracking: async (_: unknown, args: { bookingId: string }, ctx: RentalContext) => {
      const booking = await ctx.loaders.booking.load(parseInput(bookingIdArg, args.bookingId, 'bookingId'));
      return booking ? trackingOf(booking, ctx) : null;
    },
    quoteSigningKeys: async (_: unknown, __: unknown, ctx: RentalContext) => (await ctx.signer.jwks()).keys,
    eventCursor: (_: unknown, __: unknown, ctx: RentalContext) => ctx.store.eventCursor(),
    viewer: (_: unknown, __: unknown, ctx: RentalContext) => ({
      id: ctx.principal.id,
      tenant: ctx.principal.tenant,
      scopes: [...ctx.principal.scopes],
      operator: isOperator(ctx.principal),
    }),
  },
  Subscription: {
    machineStatusChanged: {
      subscribe: async (_: unknown, args: { machineIds?: string[] | null; after?: string | null }, ctx: RentalContext) => {
        const after = await ctx.events.resumeCursor(args.after);
        const keys = parseInput(machineIdsFilter, args.machineIds, 'machineIds') ?? null;
        if (keys) {
          const known = new Set((await ctx.store.machinesByIds(keys)).map((m) => m.id));
          const unknown = keys.filter((id) => !known.has(id));
          if (unknown.length > 0) throw domainError('NOT_FOUND', `Machine ${unknown.join(', ')} not found`);
        }
        const stream = ctx.events.stream<MachineStatusEvent>(TOPICS.machineStatus, { after, keys });
        return mapEvents(stream, (e) => ({ machineStatusChanged: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { machineStatusChanged: MachineStatusView }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.machineStatusChanged;
      },
    },
    fleetSummaryChanged: {
      subscribe: async (_: unknown, args: { after?: string | null }, ctx: RentalContext) => {
        const stream = ctx.events.stream<FleetSummaryRecord & { at: string }>(TOPICS.fleetSummary, { after: await ctx.events.resumeCursor(args.after) });
        return mapEvents(stream, (e) => ({ fleetSummaryChanged: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { fleetSummaryChanged: FleetSummaryRecord & { cursor: string; at: string } }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.fleetSummaryChanged;
      },
    },
    trackingUpdated: {
      subscribe: async (_: unknown, args: { bookingId: string; after?: string | null }, ctx: RentalContext) => {
        const after = await ctx.events.resumeCursor(args.after);
        const booking = await ctx.loaders.booking.load(parseInput(bookingIdArg, args.bookingId, 'bookingId'));
        if (!booking) throw domainError('NOT_FOUND', `Booking ${args.bookingId} not found`);
        const stream = ctx.events.stream<TrackingEventPayload>(TOPICS.tracking, { after, keys: [booking.id] });
        return mapEvents(
          stream,
          (e) => ({ trackingUpdated: { ...e.payload, cursor: e.id } }),
          (e) => e.payload.status === 'completed',
        );
      },
      resolve: (payload: { trackingUpdated: TrackingEventPayload & { cursor: string } }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.trackingUpdated;
      },
    },
  },
  MachineStatusEvent: {
    machine: (e: MachineStatusView, _: unknown, ctx: RentalContext) => ctx.loaders.machine.load(e.machineId),
    previousStatus: (e: MachineStatusView) => upper(e.previousStatus),
    status: (e: MachineStatusView) => upper(e.status),
    reason: (e: MachineStatusView) => upper(e.reason),
  },
  TrackingEvent: {
    booking: (e: TrackingEventPayload, _: unknown, ctx: RentalContext) => ctx.loaders.booking.load(e.bookingId),
    status: (e: TrackingEventPayload) => upper(e.status),
    coordinates: (e: TrackingEventPayload) => ({ latitude: e.latitude, longitude: e.longitude }),
    // Events published before forecasts carry the rule's ETA alone.
    etaQ10: (e: TrackingEventPayload) => e.etaQ10 ?? e.eta,
    etaQ90: (e: TrackingEventPayload) => e.etaQ90 ?? e.eta,
    etaSource: (e: TrackingEventPayload) => upper(e.etaSource ?? 'rule'),
    etaModelVersion: (e: TrackingEventPayload) => e.etaModelVersion ?? null,
  },
  Mutation: {
    createQuote: async (_: unknown, args: { input: unknown }, ctx: RentalContext) => {
      const input = parseInput(createQuoteInput, args.input);
      // The lower bound is where the machines can be on site, which the store knows (their depots).
      const latest = ctx.now.getTime() + START_TIME_WINDOW.futureDays * 86_400_000;
      if (input.startTime.getTime() > latest) {
        throw invalidInput([{ field: 'startTime', message: `must be at most ${START_TIME_WINDOW.futureDays} days ahead` }]);
      }
      const quote = await ctx.store.createQuote({ ...input, now: ctx.now, tenant: ctx.principal.tenant });
      ctx.loaders.quote.prime(quote.id, quote);
      return quote;
    },
    confirmBooking: async (_: unknown, args: { input: unknown }, ctx: RentalContext) => {
      const input = parseInput(confirmBookingInput, args.input);
      const key = ctx.idempotencyKey === undefined ? null : parseInput(idempotencyKey, ctx.idempotencyKey, 'Idempotency-Key');
      const booking = await ctx.store.confirmBooking({ ...input, idempotencyKey: key, now: ctx.now, viewer: viewerOf(ctx.principal) });
      ctx.loaders.booking.prime(booking.id, booking);
      return booking;
    },
    completeBooking: async (_: unknown, args: { bookingId: unknown }, ctx: RentalContext) => {
      const bookingId = parseInput(bookingIdArg, args.bookingId, 'bookingId');
      const booking = await ctx.store.completeBooking({ bookingId, now: ctx.now, viewer: viewerOf(ctx.principal) });
      ctx.loaders.booking.clear(booking.id).prime(booking.id, booking);
      return booking;
    },
  },
  Machine: {
    __resolveReference: (ref: { id: string }, ctx: RentalContext) => ctx.loaders.machine.load(parseInput(idArg, ref.id, 'id')),
    hourlyRate: (m: MachineRecord) => euros(m.hourlyRateCents),
    status: (m: MachineRecord) => upper(m.status),
    depot: (m: MachineRecord, _: unknown, ctx: RentalContext) => ctx.store.depot(m.depotId),
  },
  Depot: { coordinates },
  Location: { coordinates },
  Quote: {
    __resolveReference: async (ref: { id: string }, ctx: RentalContext) => ctx.loaders.quote.load(parseInput(quoteIdRef, ref.id, 'id')),
    status: (q: QuoteRecord, _: unknown, ctx: RentalContext) => upper(effectiveQuoteStatus(q, ctx.now)),
    machines: (q: QuoteRecord, _: unknown, ctx: RentalContext) => machinesOf(q.machineIds, ctx),
    location: (q: QuoteRecord, _: unknown, ctx: RentalContext) => ctx.store.location(q.locationId),
    lineItems: (q: QuoteRecord) => q.lineItems,
    deliveries: (q: QuoteRecord) => q.deliveries,
    subtotal: (q: QuoteRecord) => euros(q.subtotalCents),
    deliveryTotal: (q: QuoteRecord) => euros(q.deliveryCents),
    earliestStart: (q: QuoteRecord) => earliestStart(q.deliveries, q.expiresAt),
    total: (q: QuoteRecord) => euros(q.totalCents),
    booking: (q: QuoteRecord, _: unknown, ctx: RentalContext) => ctx.loaders.bookingByQuote.load(q.id),
  },
  QuoteLineItem: {
    machine: (l: LineItem, _: unknown, ctx: RentalContext) => ctx.loaders.machine.load(l.machineId),
    hourlyRate: (l: LineItem) => euros(l.hourlyRateCents),
    amount: (l: LineItem) => euros(l.amountCents),
  },
  DeliveryCharge: {
    depot: (d: DeliveryCharge, _: unknown, ctx: RentalContext) => ctx.store.depot(d.depotId),
    machines: (d: DeliveryCharge, _: unknown, ctx: RentalContext) => machinesOf(d.machineIds, ctx),
    amount: (d: DeliveryCharge) => euros(d.amountCents),
  },
  Booking: {
    __resolveReference: (ref: { id: string }, ctx: RentalContext) => ctx.loaders.booking.load(parseInput(bookingIdRef, ref.id, 'id')),
    status: (b: BookingRecord) => upper(b.status),
    quote: async (b: BookingRecord, _: unknown, ctx: RentalContext) => must(await ctx.loaders.quote.load(b.quoteId), 'quote'),
    machines: (b: BookingRecord, _: unknown, ctx: RentalContext) => machinesOf(b.machineIds, ctx),
    location: (b: BookingRecord, _: unknown, ctx: RentalContext) => ctx.store.location(b.locationId),
    bill: (b: BookingRecord) => ({
      currency: 'EUR',
      quotedHours: b.durationHours,
      actualHours: b.actualHours,
      billableHours: b.billableHours,
      quotedAmount: euros(b.quotedCents),
      overtimeAmount: b.overtimeCents === null ? null : euros(b.overtimeCents),
      finalAmount: b.finalCents === null ? null : euros(b.finalCents),
      closed: b.status === 'completed',
      closedAt: b.completedAt,
    }),
    tracking: (b: BookingRecord, _: unknown, ctx: RentalContext) => trackingOf(b, ctx),
    deliveryDistanceKm: (b: BookingRecord) => lastLeg(b).distanceKm,
    deliveryDepartAt: (b: BookingRecord) => lastLeg(b).departAt,
  },
  Tracking: {
    bookingId: (t: TrackingView) => t.booking.id,
    status: (t: TrackingView) => upper(t.state.status),
    coordinates: (t: TrackingView) => t.state.coordinates,
    eta: (t: TrackingView) => t.state.eta,
    etaQ10: (t: TrackingView) => t.state.etaQ10,
    etaQ90: (t: TrackingView) => t.state.etaQ90,
    etaSource: (t: TrackingView) => upper(t.state.etaSource),
    etaModelVersion: (t: TrackingView) => t.state.etaModelVersion,
    minutesRemaining: (t: TrackingView) => t.state.minutesRemaining,
    distanceRemainingKm: (t: TrackingView) => t.state.distanceRemainingKm,
    legs: (t: TrackingView) => t.state.legs,
    computedAt: (t: TrackingView) => t.computedAt,
  },
  DeliveryLeg: {
    depot: (l: LegState, _: unknown, ctx: RentalContext) => ctx.store.depot(l.leg.depotId),
    machines: (l: LegState, _: unknown, ctx: RentalContext) => machinesOf(l.leg.machineIds, ctx),
    status: (l: LegState) => upper(l.status),
    distanceKm: (l: LegState) => l.leg.distanceKm,
    dispatchAt: (l: LegState) => l.leg.dispatchAt,
    departAt: (l: LegState) => l.leg.departAt,
    eta: (l: LegState) => l.eta,
    etaQ10: (l: LegState) => l.etaQ10,
    etaQ90: (l: LegState) => l.etaQ90,
    etaSource: (l: LegState) => upper(l.etaSource),
    etaModelVersion: (l: LegState) => l.etaModelVersion,
  },
} satisfies Resolvers;

/** The typed map above, in the shape `buildSubgraphSchema` accepts. */
export const resolverMap = rentalResolvers as unknown as GraphQLResolverMap<unknown>;

