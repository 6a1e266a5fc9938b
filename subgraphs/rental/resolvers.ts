import { sequenceCursor } from '../../platform/cursor.js';
import { domainError } from '../../platform/errors.js';
import { mapEvents } from '../../platform/event-hub.js';
import { isOperator } from '../../platform/principal.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { invalidInput, parseInput } from '../../platform/validate.js';
import { ownerOf, viewerOf } from '../../platform/ownership.js';
import { createLoaders, type MachineStatusView, type RentalContext, type TrackingEventView, type TrackingView } from './context.js';
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
import { TOPICS, type BookingRecord, type FleetSummaryRecord, type MachineStatusEvent } from './records.js';
import type { Resolvers } from './schema-types.js';
import { criticalLeg, earliestStart, type TrackingEventPayload } from './tracking.js';

const must = <T>(value: T | null | undefined, what: string): T => {
  if (value === null || value === undefined) throw new Error(`${what} is missing`);
  return value;
};
const euros = (cents: number) => cents / 100;
/** An internal lower-case value as its GraphQL enum value. */
const upper = <T extends string>(s: T) => s.toUpperCase() as Uppercase<T>;
const coordinates = (p: { latitude: number; longitude: number }) => ({ latitude: p.latitude, longitude: p.longitude });
const machinesOf = async (ids: string[], ctx: RentalContext) =>
  (await ctx.loaders.machine.loadMany(ids)).map((m, i) => {
    if (m instanceof Error) throw m;
    return must(m, `machine ${ids[i]}`);
  });
/** Cursors of the bookings ledger, by booking sequence number. */
const bookingCursor = sequenceCursor('booking');

/** The leg that arrives last: the booking is on site when it is. */
const lastLeg = (b: BookingRecord) => criticalLeg(b.legs);

function trackingOf(booking: BookingRecord, ctx: RentalContext): TrackingView {
  return { booking, state: ctx.service.tracking(booking, ctx.now), computedAt: ctx.now };
}

/** Fresh time and loaders for one subscription event: a long-lived context must not serve stale rows. */
function renew(ctx: RentalContext): void {
  ctx.now = ctx.clock.now();
  ctx.loaders = createLoaders(ctx.service, ctx.principal);
}

export const rentalResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Query: {
    machines: async (_, __, ctx) => {
      return ctx.service.machines(ctx.now);
    },
    machine: async (_, args, ctx) => {
      const id = parseInput(machineIdArg, args.id, 'id');
      return ctx.service.machineAsOf(() => ctx.loaders.machine.clear(id).load(id), ctx.now);
    },
    locations: (_, __, ctx) => ctx.service.locations(),
    depots: (_, __, ctx) => ctx.service.depots(),
    fleetSummary: async (_, __, ctx) => {
      return ctx.service.fleetSummary(ctx.now);
    },
    quote: async (_, args, ctx) => {
      const id = parseInput(quoteIdArg, args.id, 'id');
      return ctx.service.quoteAsOf(() => ctx.loaders.quote.clear(id).load(id), ctx.now);
    },
    booking: (_, args, ctx) => ctx.loaders.booking.load(parseInput(bookingIdArg, args.id, 'id')),
    bookings: async (_, args, ctx) => {
      const { first, after } = parseInput(bookingsPageArgs, args);
      // The viewer the request was made for: the page is its tenant's (every tenant's for an operator),
      // kept for the tenant, whichever of its principals asks.
      const viewer = ctx.viewer;
      const page = await ctx.service.bookingsPage(first, after === null || after === undefined ? null : bookingCursor.decode(after), viewer);
      for (const b of page.rows) ctx.loaders.booking.prime(b.id, b);
      const edges = page.rows.map((node) => ({ cursor: bookingCursor.encode(node.seq), node }));
      return { edges, pageInfo: { hasNextPage: page.hasNext, endCursor: edges.at(-1)?.cursor ?? null }, viewer };
    },
    tracking: async (_, args, ctx) => {
      const booking = await ctx.loaders.booking.load(parseInput(bookingIdArg, args.bookingId, 'bookingId'));
      return booking ? trackingOf(booking, ctx) : null;
    },
    quoteSigningKeys: (_, __, ctx) => ctx.service.signingKeys(),
    eventCursor: (_, __, ctx) => ctx.service.eventCursor(),
    viewer: (_, __, ctx) => ({
      id: ctx.principal.id,
      tenant: ctx.principal.tenant,
      scopes: [...ctx.principal.scopes],
      operator: isOperator(ctx.principal),
    }),
  },
  Subscription: {
    machineStatusChanged: {
      subscribe: async (_, args, ctx) => {
        const after = await ctx.events.resumeCursor(args.after, TOPICS.machineStatus);
        const keys = parseInput(machineIdsFilter, args.machineIds, 'machineIds') ?? null;
        if (keys) {
          const known = new Set((await ctx.service.machinesByIds(keys)).map((m) => m.id));
          const unknown = keys.filter((id) => !known.has(id));
          if (unknown.length > 0) throw domainError('NOT_FOUND', `Machine ${unknown.join(', ')} not found`);
        }
        const stream = ctx.events.stream<MachineStatusEvent>(TOPICS.machineStatus, { after, keys, viewer: viewerOf(ctx.principal) });
        return mapEvents(stream, (e) => ({ machineStatusChanged: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { machineStatusChanged: MachineStatusView }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.machineStatusChanged;
      },
    },
    fleetSummaryChanged: {
      subscribe: async (_, args, ctx) => {
        const stream = ctx.events.stream<FleetSummaryRecord & { at: string }>(TOPICS.fleetSummary, {
          after: await ctx.events.resumeCursor(args.after, TOPICS.fleetSummary),
          viewer: viewerOf(ctx.principal),
        });
        return mapEvents(stream, (e) => ({ fleetSummaryChanged: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { fleetSummaryChanged: FleetSummaryRecord & { cursor: string; at: string } }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.fleetSummaryChanged;
      },
    },
    trackingUpdated: {
      subscribe: async (_, args, ctx) => {
        const after = await ctx.events.resumeCursor(args.after, TOPICS.tracking);
        const booking = await ctx.loaders.booking.load(parseInput(bookingIdArg, args.bookingId, 'bookingId'));
        if (!booking) throw domainError('NOT_FOUND', `Booking ${args.bookingId} not found`);
        const stream = ctx.events.stream<TrackingEventPayload>(TOPICS.tracking, { after, keys: [booking.id], viewer: viewerOf(ctx.principal) });
        return mapEvents(
          stream,
          (e) => ({ trackingUpdated: { ...e.payload, cursor: e.id } }),
          (e) => e.payload.status === 'completed',
        );
      },
      resolve: (payload: { trackingUpdated: TrackingEventView }, _: unknown, ctx: RentalContext) => {
        renew(ctx);
        return payload.trackingUpdated;
      },
    },
  },
  MachineStatusEvent: {
    machine: async (e, _, ctx) => must(await ctx.loaders.machine.load(e.machineId), `machine ${e.machineId}`),
    previousStatus: (e) => upper(e.previousStatus),
    status: (e) => upper(e.status),
    reason: (e) => upper(e.reason),
  },
  TrackingEvent: {
    booking: async (e, _, ctx) => must(await ctx.loaders.booking.load(e.bookingId), `booking ${e.bookingId}`),
    status: (e) => upper(e.status),
    coordinates: (e) => ({ latitude: e.latitude, longitude: e.longitude }),
    // Events published before forecasts carry the rule's ETA alone.
    etaQ10: (e) => e.etaQ10 ?? e.eta,
    etaQ90: (e) => e.etaQ90 ?? e.eta,
    etaSource: (e) => upper(e.etaSource ?? 'rule'),
    etaModelVersion: (e) => e.etaModelVersion ?? null,
  },
  Mutation: {
    createQuote: async (_, args, ctx) => {
      const input = parseInput(createQuoteInput, args.input);
      // The lower bound is where the machines can be on site, which the service knows (their depots).
      const latest = ctx.now.getTime() + START_TIME_WINDOW.futureDays * 86_400_000;
      if (input.startTime.getTime() > latest) {
        throw invalidInput([{ field: 'startTime', message: `must be at most ${START_TIME_WINDOW.futureDays} days ahead` }]);
      }
      const quote = await ctx.service.createQuote({ ...input, now: ctx.now, owner: ownerOf(ctx.principal) });
      ctx.loaders.quote.prime(quote.id, quote);
      return quote;
    },
    confirmBooking: async (_, args, ctx) => {
      const input = parseInput(confirmBookingInput, args.input);
      const key = ctx.idempotencyKey === undefined ? null : parseInput(idempotencyKey, ctx.idempotencyKey, 'Idempotency-Key');
      const booking = await ctx.service.confirmBooking({ ...input, idempotencyKey: key, now: ctx.now, viewer: viewerOf(ctx.principal) });
      ctx.loaders.booking.prime(booking.id, booking);
      return booking;
    },
    completeBooking: async (_, args, ctx) => {
      const bookingId = parseInput(bookingIdArg, args.bookingId, 'bookingId');
      const booking = await ctx.service.completeBooking({ bookingId, now: ctx.now, viewer: viewerOf(ctx.principal) });
      ctx.loaders.booking.clear(booking.id).prime(booking.id, booking);
      return booking;
    },
  },
  Machine: {
    __resolveReference: (ref, ctx) => ctx.loaders.machine.load(parseInput(idArg, ref.id, 'id')),
    hourlyRate: (m) => euros(m.hourlyRateCents),
    status: (m) => upper(m.status),
    depot: (m, _, ctx) => must(ctx.service.depot(m.depotId), `depot ${m.depotId}`),
  },
  Depot: { coordinates },
  Location: { coordinates },
  Quote: {
    __resolveReference: async (ref, ctx) => ctx.loaders.quote.load(parseInput(quoteIdRef, ref.id, 'id')),
    status: (q, _, ctx) => upper(ctx.service.quoteStatus(q, ctx.now)),
    machines: (q, _, ctx) => machinesOf(q.machineIds, ctx),
    location: (q, _, ctx) => must(ctx.service.location(q.locationId), `location ${q.locationId}`),
    lineItems: (q) => q.lineItems,
    deliveries: (q) => q.deliveries,
    subtotal: (q) => euros(q.subtotalCents),
    deliveryTotal: (q) => euros(q.deliveryCents),
    earliestStart: (q) => earliestStart(q.deliveries, q.expiresAt),
    total: (q) => euros(q.totalCents),
    booking: (q, _, ctx) => ctx.loaders.bookingByQuote.load(q.id),
  },
  QuoteLineItem: {
    machine: async (l, _, ctx) => must(await ctx.loaders.machine.load(l.machineId), `machine ${l.machineId}`),
    hourlyRate: (l) => euros(l.hourlyRateCents),
    amount: (l) => euros(l.amountCents),
  },
  DeliveryCharge: {
    depot: (d, _, ctx) => must(ctx.service.depot(d.depotId), `depot ${d.depotId}`),
    machines: (d, _, ctx) => machinesOf(d.machineIds, ctx),
    amount: (d) => euros(d.amountCents),
  },
  BookingConnection: {
    totalCount: (page, _, ctx) => ctx.service.bookingsTotal(page.viewer),
  },
  Booking: {
    __resolveReference: (ref, ctx) => ctx.loaders.booking.load(parseInput(bookingIdRef, ref.id, 'id')),
    status: (b) => upper(b.status),
    quote: async (b, _, ctx) => must(await ctx.loaders.quote.load(b.quoteId), 'quote'),
    machines: (b, _, ctx) => machinesOf(b.machineIds, ctx),
    location: (b, _, ctx) => must(ctx.service.location(b.locationId), `location ${b.locationId}`),
    bill: (b) => ({
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
    tracking: (b, _, ctx) => trackingOf(b, ctx),
    deliveryDistanceKm: (b) => lastLeg(b).distanceKm,
    deliveryDepartAt: (b) => lastLeg(b).departAt,
  },
  Tracking: {
    bookingId: (t) => t.booking.id,
    status: (t) => upper(t.state.status),
    coordinates: (t) => t.state.coordinates,
    eta: (t) => t.state.eta,
    etaQ10: (t) => t.state.etaQ10,
    etaQ90: (t) => t.state.etaQ90,
    etaSource: (t) => upper(t.state.etaSource),
    etaModelVersion: (t) => t.state.etaModelVersion,
    minutesRemaining: (t) => t.state.minutesRemaining,
    distanceRemainingKm: (t) => t.state.distanceRemainingKm,
    legs: (t) => t.state.legs,
    computedAt: (t) => t.computedAt,
  },
  DeliveryLeg: {
    depot: (l, _, ctx) => must(ctx.service.depot(l.leg.depotId), `depot ${l.leg.depotId}`),
    machines: (l, _, ctx) => machinesOf(l.leg.machineIds, ctx),
    status: (l) => upper(l.status),
    distanceKm: (l) => l.leg.distanceKm,
    dispatchAt: (l) => l.leg.dispatchAt,
    departAt: (l) => l.leg.departAt,
    eta: (l) => l.eta,
    etaQ10: (l) => l.etaQ10,
    etaQ90: (l) => l.etaQ90,
    etaSource: (l) => upper(l.etaSource),
    etaModelVersion: (l) => l.etaModelVersion,
  },
};
