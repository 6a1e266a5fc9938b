import type { DeliveryCharge, LineItem } from './pricing.js';
import type { PlannedLeg } from './tracking.js';
import type { TravelForecast } from './travel.js';

export type MachineStatus = 'available' | 'reserved' | 'in_use';
export type QuoteStatus = 'active' | 'confirmed' | 'expired';
type BookingStatus = 'confirmed' | 'completed';

/** The outbox topics the rental subgraph writes (subgraphs/rental/store.ts) and its subscriptions read. */
export const TOPICS = {
  /** key: machine id */
  machineStatus: 'rental.machine_status',
  /** fleet-wide, no key */
  fleetSummary: 'rental.fleet_summary',
  /** key: booking id */
  booking: 'rental.booking',
  /** key: booking id */
  tracking: 'rental.tracking',
  /** key: booking id; a booking's delivery plan forecast again (what its tracking is computed from) */
  deliveryPlan: 'rental.delivery_plan',
  /** key: key id; a quote signing key stored (what `quoteSigningKeys` lists) */
  signingKey: 'rental.signing_key',
  /** key: quote id; a quote expired that held no machine any more (one that did is told by its machines' events) */
  quoteExpired: 'rental.quote_expired',
} as const;

/**
 * The types of the rental subgraph's state tables (subgraphs/rental/index.ts, `state`): what its reads
 * depend on and its events' tags name (platform/state-trace.ts).
 */
export const STATE_TYPES = {
  machine: 'Machine',
  quote: 'Quote',
  booking: 'Booking',
  depot: 'Depot',
  location: 'Location',
  signingKey: 'SigningKey',
} as const;

/** A machine's status change as its event carries it. */
export interface MachineStatusEvent {
  machineId: string;
  previousStatus: MachineStatus;
  status: MachineStatus;
  reason: 'quote' | 'confirm' | 'complete' | 'expiry';
  quoteId: string | null;
  bookingId: string | null;
  at: string;
}

export interface Place {
  id: string;
  name: string;
  latitude: number;
  longitude: number;
}

export interface MachineRecord {
  id: string;
  name: string;
  category: string;
  hourlyRateCents: number;
  depotId: string;
  status: MachineStatus;
  /** When its reservation expires (its quote's expiry) while it is reserved; null otherwise. */
  reservedUntil: Date | null;
}

export interface QuoteRecord {
  id: string;
  /** The tenant whose principal made it; only it (and operators) see it. */
  tenant: string;
  /** The principal of that tenant that made it. */
  principal: string;
  status: QuoteStatus;
  machineIds: string[];
  locationId: string;
  startTime: Date;
  durationHours: number;
  utilization: number;
  surgeMultiplier: number;
  leadTimeHours: number;
  leadTimeFactor: number;
  lineItems: LineItem[];
  /** Each run with the forecast its earliest start was promised against (absent in older quotes). */
  deliveries: (DeliveryCharge & { travel?: TravelForecast })[];
  subtotalCents: number;
  deliveryCents: number;
  totalCents: number;
  currency: string;
  signature: string;
  createdAt: Date;
  expiresAt: Date;
}

export interface BookingRecord {
  seq: string;
  id: string;
  /** The tenant of its quote. */
  tenant: string;
  /** The principal of that tenant that confirmed it. */
  principal: string;
  quoteId: string;
  customerName: string;
  status: BookingStatus;
  machineIds: string[];
  locationId: string;
  startTime: Date;
  durationHours: number;
  confirmedAt: Date;
  completedAt: Date | null;
  legs: PlannedLeg[];
  quotedCents: number;
  actualHours: number | null;
  billableHours: number | null;
  overtimeCents: number | null;
  finalCents: number | null;
}

export interface FleetSummaryRecord {
  available: number;
  reserved: number;
  inUse: number;
  total: number;
  utilization: number;
  surgeMultiplier: number;
}

/** A quote past its expiry reads as expired even before the sweeper has released it. */
export function effectiveQuoteStatus(quote: QuoteRecord, now: Date): QuoteStatus {
  return quote.status === 'active' && quote.expiresAt.getTime() <= now.getTime() ? 'expired' : quote.status;
}

/**
 * Until when `effectiveQuoteStatus(quote, now)` holds whatever the clock does: an active quote's expiry;
 * null (until the quote is written) once it is confirmed or expired.
 */
export function quoteStatusHoldsUntil(quote: QuoteRecord, now: Date): Date | null {
  return quote.status === 'active' && quote.expiresAt.getTime() > now.getTime() ? quote.expiresAt : null;
}

/** Until when the machines shown hold whatever the clock does: the earliest expiry of a reservation among them (null: none reserved). */
export function reservationsHoldUntil(machines: readonly Pick<MachineRecord, 'reservedUntil'>[]): Date | null {
  let earliest: Date | null = null;
  for (const m of machines) if (m.reservedUntil && (earliest === null || m.reservedUntil.getTime() < earliest.getTime())) earliest = m.reservedUntil;
  return earliest;
}
