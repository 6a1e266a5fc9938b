import { roadKm, type LatLon } from './geo.js';

/**
 * Yield pricing. Every figure is a pure function of the fleet state after the reservation, the request
 * and the pricing instant, so the same state prices the same way. Amounts are integer cents.
 */
export const PRICING = {
  currency: 'EUR',
  /** Utilization at which surge starts. */
  surgeThreshold: 0.6,
  /** Extra multiplier at full utilization (multiplier 1 + surgeMax at u = 1). */
  surgeMax: 1.5,
  /** Lead-time knots (hours before start -> factor), interpolated linearly, flat beyond the ends. */
  leadTimeKnots: [
    [0, 1.2],
    [24, 1.05],
    [72, 1.0],
    [336, 0.92],
  ] as const,
  /** Per truck run from a depot: a fixed fee plus a charge per road km (one way). */
  deliveryBaseCents: 7500,
  deliveryPerKmCents: 240,
  /** Each machine beyond the first on the same truck. */
  deliveryExtraMachineCents: 2500,
  /** Hours beyond the quote are billed at the quote's effective hourly rate times this. */
  overtimePremium: 1.25,
} as const;

/** Surge multiplier for a utilization u in [0, 1]: 1 up to the threshold, then rising quadratically. */
export function surgeMultiplier(utilization: number): number {
  const u = Math.min(1, Math.max(0, utilization));
  const over = Math.max(0, (u - PRICING.surgeThreshold) / (1 - PRICING.surgeThreshold));
  return round4(1 + PRICING.surgeMax * over * over);
}

/** Short notice costs more, early booking less. */
export function leadTimeFactor(leadHours: number): number {
  const knots = PRICING.leadTimeKnots;
  const first = knots[0];
  const last = knots[knots.length - 1]!;
  if (leadHours <= first[0]) return first[1];
  if (leadHours >= last[0]) return last[1];
  for (let i = 1; i < knots.length; i++) {
    const [h1, f1] = knots[i]!;
    const [h0, f0] = knots[i - 1]!;
    if (leadHours <= h1) return round4(f0 + ((f1 - f0) * (leadHours - h0)) / (h1 - h0));
  }
  return last[1];
}

export interface PricedMachine {
  id: string;
  hourlyRateCents: number;
  depotId: string;
  depot: LatLon;
}

export interface FleetCounts {
  available: number;
  reserved: number;
  inUse: number;
  total: number;
}

export interface LineItem {
  machineId: string;
  hourlyRateCents: number;
  hours: number;
  surgeMultiplier: number;
  leadTimeFactor: number;
  amountCents: number;
}

export interface DeliveryCharge {
  depotId: string;
  machineIds: string[];
  distanceKm: number;
  amountCents: number;
}

export interface PriceBreakdown {
  utilization: number;
  surgeMultiplier: number;
  leadTimeHours: number;
  leadTimeFactor: number;
  lineItems: LineItem[];
  deliveries: DeliveryCharge[];
  subtotalCents: number;
  deliveryCents: number;
  totalCents: number;
}

export function utilizationOf(counts: FleetCounts): number {
  return counts.total === 0 ? 0 : round4((counts.reserved + counts.inUse) / counts.total);
}

/** One truck run per depot the machines come from, with its road distance to the site; in depot order. */
export function deliveryRuns(machines: readonly PricedMachine[], site: LatLon): { depotId: string; machineIds: string[]; distanceKm: number }[] {
  const byDepot = new Map<string, PricedMachine[]>();
  for (const m of [...machines].sort((a, b) => a.id.localeCompare(b.id))) byDepot.set(m.depotId, [...(byDepot.get(m.depotId) ?? []), m]);
  return [...byDepot.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([depotId, group]) => ({ depotId, machineIds: group.map((m) => m.id), distanceKm: round2(roadKm(group[0]!.depot, site)) }));
}

/**
 * Prices a quote. `countsAfter` is the fleet with this quote's machines already reserved.
 */
export function priceQuote(args: {
  machines: PricedMachine[];
  site: LatLon;
  startTime: Date;
  durationHours: number;
  countsAfter: FleetCounts;
  pricedAt: Date;
}): PriceBreakdown {
  const utilization = utilizationOf(args.countsAfter);
  const surge = surgeMultiplier(utilization);
  const leadTimeHours = round2(Math.max(0, (args.startTime.getTime() - args.pricedAt.getTime()) / 3_600_000));
  const leadFactor = leadTimeFactor(leadTimeHours);
  const machines = [...args.machines].sort((a, b) => a.id.localeCompare(b.id));
  const lineItems = machines.map((m) => ({
    machineId: m.id,
    hourlyRateCents: m.hourlyRateCents,
    hours: args.durationHours,
    surgeMultiplier: surge,
    leadTimeFactor: leadFactor,
    amountCents: Math.round(m.hourlyRateCents * args.durationHours * surge * leadFactor),
  }));
  const deliveries = deliveryRuns(machines, args.site).map((run) => ({
    ...run,
    amountCents: Math.round(
      PRICING.deliveryBaseCents + PRICING.deliveryPerKmCents * run.distanceKm + PRICING.deliveryExtraMachineCents * (run.machineIds.length - 1),
    ),
  }));
  const subtotalCents = lineItems.reduce((s, l) => s + l.amountCents, 0);
  const deliveryCents = deliveries.reduce((s, d) => s + d.amountCents, 0);
  return {
    utilization,
    surgeMultiplier: surge,
    leadTimeHours,
    leadTimeFactor: leadFactor,
    lineItems,
    deliveries,
    subtotalCents,
    deliveryCents,
    totalCents: subtotalCents + deliveryCents,
  };
}

export interface Bill {
  actualHours: number;
  billableHours: number;
  overtimeCents: number;
  finalCents: number;
}

/**
 * Closes a bill: the customer pays at least the quote; hours beyond it cost the quote's effective hourly
 * machine rate (surge and lead time included) times the overtime premium. Delivery is not re-charged.
 */
export function closeBill(args: { quotedHours: number; subtotalCents: number; totalCents: number; rentalStart: Date; completedAt: Date }): Bill {
  const elapsedHours = Math.max(0, (args.completedAt.getTime() - args.rentalStart.getTime()) / 3_600_000);
  const actualHours = Math.ceil(elapsedHours * 4 - 1e-9) / 4;
  const billableHours = Math.max(args.quotedHours, actualHours);
  const overtimeHours = billableHours - args.quotedHours;
  const effectiveHourlyCents = args.quotedHours > 0 ? args.subtotalCents / args.quotedHours : 0;
  const overtimeCents = Math.round(effectiveHourlyCents * overtimeHours * PRICING.overtimePremium);
  return { actualHours, billableHours, overtimeCents, finalCents: args.totalCents + overtimeCents };
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
