import { z } from 'zod';
import { instant } from '../../platform/rest.js';
import { idempotencyKey } from './inputs.js';

/*
 * The documented answers of the rental REST paths (rest.ts): the OpenAPI document's schemas and, outside
 * production, the check on every answer. Shapes several paths share carry a components id.
 */

const eur = (what: string) => z.number().describe(`${what}, EUR (cents exact)`);
const machineIds = z.array(z.string()).describe('Machine ids (EQ-001 .. EQ-015)');

const rentalPoint = z
  .strictObject({
    lat: z.number().min(-90).max(90).describe('Latitude, degrees (WGS 84)'),
    lon: z.number().min(-180).max(180).describe('Longitude, degrees (WGS 84)'),
  })
  .meta({ id: 'RentalPoint' });

const rentalPlace = z
  .strictObject({ id: z.string(), name: z.string(), coordinates: rentalPoint })
  .meta({ id: 'RentalPlace', description: 'A depot (DEP-RTM) or a delivery site (LOC-001)' });

export const rentalFleetSummary = z
  .strictObject({
    available: z.number().int().min(0),
    reserved: z.number().int().min(0).describe('Machines held by an active quote'),
    in_use: z.number().int().min(0).describe('Machines of confirmed bookings'),
    total: z.number().int().min(0),
    utilization: z.number().min(0).max(1).describe('(reserved + in_use) / total'),
    surge_multiplier: z.number().min(1).describe('The multiplier a one-machine quote would be priced at now'),
  })
  .meta({ id: 'RentalFleetSummary' });

export const rentalHealth = z.strictObject({
  status: z.literal('ok'),
  service: z.literal('rental'),
  version: z.literal('1.0'),
  fleet: rentalFleetSummary,
});

const rentalMachine = z
  .strictObject({
    id: z.string().describe('EQ- and three digits'),
    name: z.string(),
    category: z.enum(['excavator', 'mini_excavator', 'wheel_loader', 'telehandler', 'crane', 'boom_lift', 'scissor_lift', 'dumper', 'roller']),
    hourly_rate: eur('Base rate per hour, before surge and lead-time factors'),
    status: z.enum(['available', 'reserved', 'in_use']),
    depot: rentalPlace,
  })
  .meta({ id: 'RentalMachine' });

export const rentalMachines = z.strictObject({ machines: z.array(rentalMachine) });
export const rentalLocations = z.strictObject({ locations: z.array(rentalPlace) });

export const rentalQuote = z
  .strictObject({
    quote_id: z.uuid(),
    status: z.enum(['active', 'confirmed', 'expired']).describe('active until confirmed or past expires_at'),
    machine_ids: machineIds,
    location_id: z.string().describe('The delivery site (LOC-001)'),
    start_time: instant(),
    earliest_start: instant().describe(
      'When the last machine can be on site if the quote is confirmed at its expiry (loading, then road time from its depot): the earliest start a quote may ask for',
    ),
    duration_hours: z.number().describe('Rental length, hours'),
    utilization: z.number().min(0).max(1).describe('Fleet utilization after this reservation, the figure the surge was priced at'),
    surge_multiplier: z.number().min(1).describe('m(u), rounded to 4 decimals before use'),
    lead_time_hours: z.number().min(0).describe('Hours between pricing and the rental start'),
    lead_time_factor: z.number().describe('f(lead time), rounded to 4 decimals before use: 1.20 at 0 h .. 0.92 from 336 h'),
    line_items: z.array(
      z
        .strictObject({
          machine_id: z.string(),
          hourly_rate: eur('Base rate per hour'),
          hours: z.number(),
          surge_multiplier: z.number().min(1),
          lead_time_factor: z.number(),
          amount: eur('hourly_rate x hours x surge_multiplier x lead_time_factor, rounded to cents'),
        })
        .meta({ id: 'RentalQuoteLineItem' }),
    ),
    deliveries: z.array(
      z
        .strictObject({
          depot_id: z.string(),
          machine_ids: machineIds,
          distance_km: z.number().describe('Road distance, km: great-circle distance x 1.25'),
          amount: eur('75.00 + 2.40 per km + 25.00 per extra machine on the truck'),
        })
        .meta({ id: 'RentalDeliveryCharge', description: "One truck run from a depot to the site, carrying that depot's machines" }),
    ),
    subtotal: eur('Sum of the line items'),
    delivery_total: eur('Sum of the deliveries'),
    total: eur('subtotal + delivery_total'),
    currency: z.literal('EUR'),
    created_at: instant(),
    expires_at: instant().describe('The quote and its reservations lapse at this instant (QUOTE_TTL_SECONDS after creation)'),
    signature: z.string().describe('Compact JWS (EdDSA, Ed25519) over the quote id, machines, price and expiry; verify with GET /rental/pricing/keys'),
  })
  .meta({ id: 'RentalQuote', description: 'A signed quote; its machines are reserved until it expires or is confirmed' });

const rentalBill = z
  .strictObject({
    currency: z.literal('EUR'),
    quoted_hours: z.number(),
    actual_hours: z
      .number()
      .nullable()
      .describe('Hours from the rental start (or confirmation, if later) to completion, rounded up to quarter hours; null until completed'),
    billable_hours: z.number().nullable().describe('max(quoted_hours, actual_hours); null until completed'),
    quoted_amount: eur('The quote total'),
    overtime_amount: z.number().nullable().describe("Hours beyond the quote at the quote's effective hourly rate plus 25%, EUR; null until completed"),
    final_amount: z.number().nullable().describe('quoted_amount + overtime_amount, EUR; null until completed'),
    closed: z.boolean(),
    closed_at: instant().nullable(),
  })
  .meta({ id: 'RentalBill' });

export const rentalBooking = z
  .strictObject({
    booking_id: z
      .string()
      .regex(/^BK-[0-9A-F]{12}$/)
      .describe('BK- and 12 hex digits'),
    quote_id: z.uuid(),
    customer_name: z.string(),
    status: z.enum(['confirmed', 'completed']),
    machine_ids: machineIds,
    location_id: z.string(),
    start_time: instant(),
    duration_hours: z.number().describe('Rental length, hours'),
    confirmed_at: instant(),
    completed_at: instant().nullable(),
    bill: rentalBill,
  })
  .meta({ id: 'RentalBooking' });

const trackingStatus = z.enum(['scheduled', 'dispatched', 'in_transit', 'on_site', 'completed']);
const etaSource = z
  .enum(['model', 'rule'])
  .describe("model: the prediction subgraph's travel model (the booking's delivery forecast); rule: 45 km/h, only while prediction cannot answer");

export const rentalTracking = z
  .strictObject({
    booking_id: z.string(),
    status: trackingStatus.describe("The status of the delivery that arrives last; coordinates are its truck's"),
    coordinates: rentalPoint,
    eta: instant().describe("Arrival of the last delivery: its travel forecast's median (q50) for the road left"),
    eta_q10: instant().describe("The last delivery's arrival at its forecast's q10 for the road left"),
    eta_q90: instant().describe("The last delivery's arrival at its forecast's q90 for the road left"),
    eta_source: etaSource,
    eta_model_version: z.string().nullable().describe("The travel model's version; null under the rule"),
    minutes_remaining: z.number().min(0),
    distance_remaining_km: z.number().min(0),
    computed_at: instant(),
    legs: z.array(
      z
        .strictObject({
          depot_id: z.string(),
          machine_ids: machineIds,
          status: trackingStatus,
          coordinates: rentalPoint,
          distance_km: z.number().describe('Road distance of the run, km'),
          distance_remaining_km: z.number().min(0),
          dispatch_at: instant(),
          depart_at: instant().describe('Dispatch plus 15 minutes of loading'),
          eta: instant().describe("The run's median arrival (q50 of its travel forecast)"),
          eta_q10: instant(),
          eta_q90: instant(),
          eta_source: etaSource,
          eta_model_version: z.string().nullable(),
        })
        .meta({ id: 'RentalDeliveryLeg', description: "One depot's truck run, planned at confirmation" }),
    ),
  })
  .meta({ id: 'RentalTracking' });

export const rentalBookingPage = z.strictObject({
  bookings: z.array(rentalBooking).describe('Newest first'),
  next_cursor: z.string().nullable().describe('Pass as ?cursor= for the next page; null on the last page'),
  total: z.number().int().min(0).describe('Bookings in the ledger'),
});

export const rentalSigningKeys = z
  .strictObject({
    keys: z.array(
      z.strictObject({
        kid: z.string(),
        kty: z.literal('OKP'),
        crv: z.literal('Ed25519'),
        x: z.string().describe('The public key, base64url'),
        alg: z.literal('EdDSA'),
        use: z.literal('sig'),
      }),
    ),
  })
  .meta({ id: 'RentalJwks', description: 'A JWKS (RFC 7517) of Ed25519 keys (RFC 8037)' });

/** Request headers of POST /rental/booking/confirm. */
export const confirmHeaders = z.object({
  'Idempotency-Key': idempotencyKey
    .optional()
    .describe('Makes the confirm safe to retry: the same key with the same request answers the booking it made; with another request it is 422'),
});

export type RentalFleetSummary = z.infer<typeof rentalFleetSummary>;
export type RentalHealth = z.infer<typeof rentalHealth>;
export type RentalMachines = z.infer<typeof rentalMachines>;
export type RentalLocations = z.infer<typeof rentalLocations>;
export type RentalPlace = z.infer<typeof rentalPlace>;
export type RentalQuote = z.infer<typeof rentalQuote>;
export type RentalBooking = z.infer<typeof rentalBooking>;
export type RentalTracking = z.infer<typeof rentalTracking>;
export type RentalBookingPage = z.infer<typeof rentalBookingPage>;
export type RentalSigningKeys = z.infer<typeof rentalSigningKeys>;
