import { z } from 'zod';
import { domainError } from '../../platform/errors.js';
import { defineRoute, oneOf, type RestRoute } from '../../platform/rest.js';
import { instantProblem } from '../../platform/scalars.js';
import { text } from '../../platform/validate.js';
import { bookingIdArg, confirmBookingInput, createQuoteInput } from './inputs.js';
import {
  confirmHeaders,
  rentalBooking,
  rentalBookingPage,
  rentalFleetSummary,
  rentalHealth,
  rentalLocations,
  rentalMachines,
  rentalQuote,
  rentalSigningKeys,
  rentalTracking,
  type RentalBooking,
  type RentalBookingPage,
  type RentalFleetSummary,
  type RentalHealth,
  type RentalLocations,
  type RentalMachines,
  type RentalPlace,
  type RentalQuote,
  type RentalSigningKeys,
  type RentalTracking,
} from './rest-schemas.js';
import type {
  RentalBookingsQuery,
  RentalCompleteBookingMutation,
  RentalConfirmBookingMutation,
  RentalCreateQuoteMutation,
  RentalFleetSummaryQuery,
  RentalHealthQuery,
  RentalLocationsQuery,
  RentalMachinesQuery,
  RentalSigningKeysQuery,
  RentalTrackingQuery,
} from './operation-types.js';

/*
 * The documented REST paths of the rental service (under /rental), each run as a GraphQL operation
 * through the gateway. Bodies are snake_case as documented; enum values are lower-case. The data types
 * each operation selects are generated from it (operation-types.ts, `npm run codegen`); the answers they
 * map to are typed by their documented schemas (rest-schemas.ts), so a mapping that strays from either
 * does not compile.
 */

type SummaryData = RentalFleetSummaryQuery['fleetSummary'];
type PlaceData = RentalLocationsQuery['locations'][number];
type Coords = PlaceData['coordinates'];
type QuoteData = RentalCreateQuoteMutation['createQuote'];
type BookingData = RentalConfirmBookingMutation['confirmBooking'];
type TrackingData = NonNullable<RentalTrackingQuery['tracking']>;

const SUMMARY = 'available reserved inUse total utilization surgeMultiplier';
const PLACE = 'id name coordinates { latitude longitude }';
const MACHINE = `id name category hourlyRate status depot { ${PLACE} }`;
const QUOTE = `id status machines { id } location { id } startTime durationHours utilization surgeMultiplier
  leadTimeHours leadTimeFactor earliestStart lineItems { machine { id } hourlyRate hours surgeMultiplier leadTimeFactor amount }
  deliveries { depot { id } machines { id } distanceKm amount } subtotal deliveryTotal total currency createdAt
  expiresAt signature`;
const BOOKING = `id status customerName quote { id } machines { id } location { id } startTime durationHours
  confirmedAt completedAt bill { currency quotedHours actualHours billableHours quotedAmount overtimeAmount
  finalAmount closed closedAt }`;
const TRACKING = `bookingId status coordinates { latitude longitude } eta etaQ10 etaQ90 etaSource etaModelVersion
  minutesRemaining distanceRemainingKm computedAt legs { depot { id } machines { id } status coordinates { latitude longitude }
  distanceKm distanceRemainingKm dispatchAt departAt eta etaQ10 etaQ90 etaSource etaModelVersion }`;

const lower = <S extends string>(s: S) => s.toLowerCase() as Lowercase<S>;
const ids = (list: { id: string }[]) => list.map((x) => x.id);
const point = (c: Coords) => ({ lat: c.latitude, lon: c.longitude });
const place = (p: PlaceData): RentalPlace => ({ id: p.id, name: p.name, coordinates: point(p.coordinates) });

const summaryBody = (s: SummaryData): RentalFleetSummary => ({
  available: s.available,
  reserved: s.reserved,
  in_use: s.inUse,
  total: s.total,
  utilization: s.utilization,
  surge_multiplier: s.surgeMultiplier,
});

const quoteBody = (q: QuoteData): RentalQuote => ({
  quote_id: q.id,
  status: lower(q.status),
  machine_ids: ids(q.machines),
  location_id: q.location.id,
  start_time: q.startTime,
  earliest_start: q.earliestStart,
  duration_hours: q.durationHours,
  utilization: q.utilization,
  surge_multiplier: q.surgeMultiplier,
  lead_time_hours: q.leadTimeHours,
  lead_time_factor: q.leadTimeFactor,
  line_items: q.lineItems.map((l) => ({
    machine_id: l.machine.id,
    hourly_rate: l.hourlyRate,
    hours: l.hours,
    surge_multiplier: l.surgeMultiplier,
    lead_time_factor: l.leadTimeFactor,
    amount: l.amount,
  })),
  deliveries: q.deliveries.map((d) => ({
    depot_id: d.depot.id,
    machine_ids: ids(d.machines),
    distance_km: d.distanceKm,
    amount: d.amount,
  })),
  subtotal: q.subtotal,
  delivery_total: q.deliveryTotal,
  total: q.total,
  currency: oneOf(q.currency, ['EUR'], 'currency'),
  created_at: q.createdAt,
  expires_at: q.expiresAt,
  signature: q.signature,
});

const bookingBody = (b: BookingData): RentalBooking => ({
  booking_id: b.id,
  quote_id: b.quote.id,
  customer_name: b.customerName,
  status: lower(b.status),
  machine_ids: ids(b.machines),
  location_id: b.location.id,
  start_time: b.startTime,
  duration_hours: b.durationHours,
  confirmed_at: b.confirmedAt,
  completed_at: b.completedAt,
  bill: {
    currency: oneOf(b.bill.currency, ['EUR'], 'bill.currency'),
    quoted_hours: b.bill.quotedHours,
    actual_hours: b.bill.actualHours,
    billable_hours: b.bill.billableHours,
    quoted_amount: b.bill.quotedAmount,
    overtime_amount: b.bill.overtimeAmount,
    final_amount: b.bill.finalAmount,
    closed: b.bill.closed,
    closed_at: b.bill.closedAt,
  },
});

const trackingBody = (t: TrackingData): RentalTracking => ({
  booking_id: t.bookingId,
  status: lower(t.status),
  coordinates: point(t.coordinates),
  eta: t.eta,
  eta_q10: t.etaQ10,
  eta_q90: t.etaQ90,
  eta_source: lower(t.etaSource),
  eta_model_version: t.etaModelVersion,
  minutes_remaining: t.minutesRemaining,
  distance_remaining_km: t.distanceRemainingKm,
  computed_at: t.computedAt,
  legs: t.legs.map((l) => ({
    depot_id: l.depot.id,
    machine_ids: ids(l.machines),
    status: lower(l.status),
    coordinates: point(l.coordinates),
    distance_km: l.distanceKm,
    distance_remaining_km: l.distanceRemainingKm,
    dispatch_at: l.dispatchAt,
    depart_at: l.departAt,
    eta: l.eta,
    eta_q10: l.etaQ10,
    eta_q90: l.etaQ90,
    eta_source: lower(l.etaSource),
    eta_model_version: l.etaModelVersion,
  })),
});

/*
 * Body and path fields reuse the subgraph's own input rules (inputs.ts), so a REST caller meets the same
 * checks, messages and id normalization as a GraphQL caller, named as REST spells the field.
 */
const bookingParams = z.object({ booking_id: bookingIdArg });

export const rentalRoutes: readonly RestRoute[] = [
  defineRoute<undefined, undefined, undefined, RentalHealthQuery>({
    method: 'GET',
    path: '/health',
    summary: 'Liveness indicator plus fleet summary',
    operation: `query RentalHealth { fleetSummary { ${SUMMARY} } }`,
    variables: () => ({}),
    result: (d): RentalHealth => ({ status: 'ok', service: 'rental', version: '1.0', fleet: summaryBody(d.fleetSummary) }),
    response: rentalHealth,
  }),
  defineRoute<undefined, undefined, undefined, RentalMachinesQuery>({
    method: 'GET',
    path: '/fleet/machines',
    summary: 'Machine catalogue with status',
    operation: `query RentalMachines { machines { ${MACHINE} } }`,
    variables: () => ({}),
    result: (d): RentalMachines => ({
      machines: d.machines.map((m) => ({
        id: m.id,
        name: m.name,
        category: lower(m.category),
        hourly_rate: m.hourlyRate,
        status: lower(m.status),
        depot: place(m.depot),
      })),
    }),
    response: rentalMachines,
  }),
  defineRoute<undefined, undefined, undefined, RentalLocationsQuery>({
    method: 'GET',
    path: '/fleet/locations',
    summary: 'Delivery sites',
    operation: `query RentalLocations { locations { ${PLACE} } }`,
    variables: () => ({}),
    result: (d): RentalLocations => ({ locations: d.locations.map(place) }),
    response: rentalLocations,
  }),
  defineRoute<undefined, undefined, undefined, RentalFleetSummaryQuery>({
    method: 'GET',
    path: '/fleet/summary',
    summary: 'Counts and utilization',
    operation: `query RentalFleetSummary { fleetSummary { ${SUMMARY} } }`,
    variables: () => ({}),
    result: (d) => summaryBody(d.fleetSummary),
    response: rentalFleetSummary,
  }),
  defineRoute<{ machine_ids: string[]; location_id: string; start_time: string; duration_hours: number }, undefined, undefined, RentalCreateQuoteMutation>({
    method: 'POST',
    path: '/pricing/quote',
    summary: 'A signed multi-machine quote; the machines become reserved',
    operation: `mutation RentalCreateQuote($input: CreateQuoteInput!) { createQuote(input: $input) { ${QUOTE} } }`,
    body: z.object({
      machine_ids: createQuoteInput.shape.machineIds,
      location_id: createQuoteInput.shape.locationId,
      start_time: z.string().check((ctx) => {
        const problem = instantProblem(ctx.value);
        if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
      }),
      duration_hours: createQuoteInput.shape.durationHours,
    }),
    variables: ({ body }) => ({
      input: {
        machineIds: body.machine_ids,
        locationId: body.location_id,
        startTime: body.start_time,
        durationHours: body.duration_hours,
      },
    }),
    result: (d) => quoteBody(d.createQuote),
    response: rentalQuote,
    errors: ['CONFLICT'],
  }),
  defineRoute<{ quote_id: string; customer_name: string }, undefined, undefined, RentalConfirmBookingMutation>({
    method: 'POST',
    path: '/booking/confirm',
    summary: 'Confirms a quote into a booking; the machines go in use',
    operation: `mutation RentalConfirmBooking($input: ConfirmBookingInput!) { confirmBooking(input: $input) { ${BOOKING} } }`,
    body: z.object({
      quote_id: confirmBookingInput.shape.quoteId,
      customer_name: confirmBookingInput.shape.customerName,
    }),
    headers: confirmHeaders,
    variables: ({ body }) => ({ input: { quoteId: body.quote_id, customerName: body.customer_name } }),
    result: (d) => bookingBody(d.confirmBooking),
    response: rentalBooking,
    errors: ['NOT_FOUND', 'CONFLICT', 'GONE', 'IDEMPOTENCY_KEY_REUSED'],
  }),
  defineRoute<undefined, undefined, { booking_id: string }, RentalTrackingQuery>({
    method: 'GET',
    path: '/booking/:booking_id/track',
    summary: 'Delivery status, coordinates and ETA',
    operation: `query RentalTracking($bookingId: ID!) { tracking(bookingId: $bookingId) { ${TRACKING} } }`,
    params: bookingParams,
    variables: ({ params }) => ({ bookingId: params.booking_id }),
    result: (d) => {
      if (!d.tracking) throw domainError('NOT_FOUND', 'Booking not found');
      return trackingBody(d.tracking);
    },
    response: rentalTracking,
    errors: ['NOT_FOUND'],
  }),
  defineRoute<undefined, undefined, { booking_id: string }, RentalCompleteBookingMutation>({
    method: 'POST',
    path: '/booking/:booking_id/complete',
    summary: 'Completes a booking: machines return to available, the bill closes',
    operation: `mutation RentalCompleteBooking($bookingId: ID!) { completeBooking(bookingId: $bookingId) { ${BOOKING} } }`,
    params: bookingParams,
    variables: ({ params }) => ({ bookingId: params.booking_id }),
    result: (d) => bookingBody(d.completeBooking),
    response: rentalBooking,
    errors: ['NOT_FOUND', 'CONFLICT'],
  }),
  defineRoute<undefined, { limit: number; cursor?: string | undefined }, undefined, RentalBookingsQuery>({
    method: 'GET',
    path: '/bookings',
    summary: 'Partner booking ledger, newest first (?limit=1..100, ?cursor=next_cursor)',
    operation: `query RentalBookings($first: Int!, $after: String) {
      bookings(first: $first, after: $after) { edges { node { ${BOOKING} } } pageInfo { hasNextPage endCursor } totalCount }
    }`,
    query: z.object({
      limit: z
        .string()
        .regex(/^\d{1,3}$/, 'must be a whole number from 1 to 100')
        .transform(Number)
        .pipe(z.number().min(1, 'must be at least 1').max(100, 'must be at most 100'))
        .default(20),
      cursor: text().min(1).optional(),
    }),
    variables: ({ query }) => ({ first: query.limit, after: query.cursor }),
    fieldNames: { after: 'cursor', first: 'limit' },
    result: (d): RentalBookingPage => ({
      bookings: d.bookings.edges.map((e) => bookingBody(e.node)),
      next_cursor: d.bookings.pageInfo.hasNextPage ? d.bookings.pageInfo.endCursor : null,
      total: d.bookings.totalCount,
    }),
    response: rentalBookingPage,
  }),
  defineRoute<undefined, undefined, undefined, RentalSigningKeysQuery>({
    method: 'GET',
    path: '/pricing/keys',
    summary: 'JWKS with the public keys that verify quote signatures',
    // Partners verify quotes offline with createRemoteJWKSet, which sends no API key.
    public: true,
    operation: 'query RentalSigningKeys { quoteSigningKeys { kid kty crv x alg use } }',
    variables: () => ({}),
    result: (d): RentalSigningKeys => ({
      keys: d.quoteSigningKeys.map((k) => ({
        ...k,
        kty: oneOf(k.kty, ['OKP'], 'kty'),
        crv: oneOf(k.crv, ['Ed25519'], 'crv'),
        alg: oneOf(k.alg, ['EdDSA'], 'alg'),
        use: oneOf(k.use, ['sig'], 'use'),
      })),
    }),
    response: rentalSigningKeys,
  }),
];
