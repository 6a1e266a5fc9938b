import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openDatabase, type Database } from '../../platform/db.js';
import { migrate, type MigrationSet } from '../../platform/migrate.js';
import { subgraphNames } from '../../schema/subgraphs.js';
import { closeBill, priceQuote, type PricedMachine } from '../../subgraphs/rental/pricing.js';
import { planLegs } from '../../subgraphs/rental/tracking.js';
import { ruleForecast, type TravelForecaster } from '../../subgraphs/rental/travel.js';
import { DEMO_PRINCIPAL } from '../../platform/principal.js';

/*
 * The benchmark's data, the same rows on every database it runs against: completed bookings for the ledger
 * (with their quotes, priced, planned and billed by the rental subgraph's own functions, at fixed instants,
 * with ids derived from their number), and extra machines that the mutation mix quotes, confirms and
 * completes. Inserted directly, after the same migrations the servers apply, so PGlite and PostgreSQL hold
 * identical data and every gateway can be asked for the same answers.
 */

export interface SeedPlan {
  /** Completed bookings in the ledger. */
  bookings: number;
  /** Machines EQ-100 .. for the mutation mix, available. */
  poolMachines: number;
}

/** The first machine number of the mutation pool (the demo fleet is EQ-001 .. EQ-015). */
export const POOL_FIRST_MACHINE = 100;

/** Machines per target for the mutation mix (each target quotes only its own). */
export const POOL_PER_TARGET = 150;

/** Seeded history is planned by the rule (completed long ago; no workload reads its ETA band). */
const byRule: TravelForecaster = async (runs) => runs.map((r) => ruleForecast(r.distanceKm));

const ANCHOR = Date.parse('2026-01-05T07:00:00.000Z');
const HOUR = 3_600_000;
const CATEGORIES = ['EXCAVATOR', 'MINI_EXCAVATOR', 'WHEEL_LOADER', 'TELEHANDLER', 'CRANE', 'BOOM_LIFT', 'SCISSOR_LIFT', 'DUMPER', 'ROLLER'];

export function machineId(n: number): string {
  return `EQ-${String(n).padStart(3, '0')}`;
}

/** The pool machines of the target at `index` in the run's list. */
export function poolOf(index: number): string[] {
  return Array.from({ length: POOL_PER_TARGET }, (_, k) => machineId(POOL_FIRST_MACHINE + index * POOL_PER_TARGET + k));
}

/** The id of seeded booking `i` (1-based): `BK-` and 12 hex digits derived from i. */
export function seededBookingId(i: number): string {
  return `BK-${digest(`booking-${i}`).slice(0, 12).toUpperCase()}`;
}

function seededQuoteId(i: number): string {
  const h = digest(`quote-${i}`);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function digest(text: string): string {
  return createHash('sha256').update(`ops-supergraph-bench/${text}`).digest('hex');
}

/** Every migration the servers apply (the platform's, then each subgraph's in composition order). */
function migrationSets(): MigrationSet[] {
  const sets: MigrationSet[] = [{ owner: 'platform', dir: fileURLToPath(new URL('../../platform/migrations/', import.meta.url)) }];
  for (const name of subgraphNames) {
    const dir = fileURLToPath(new URL(`../../subgraphs/${name}/migrations/`, import.meta.url));
    if (existsSync(dir)) sets.push({ owner: name, dir });
  }
  return sets;
}

/** Migrates and seeds a PGlite data directory, or a PostgreSQL schema (created when missing). */
export async function seedDatabase(target: { dataDir: string } | { url: string; schema: string }, plan: SeedPlan): Promise<void> {
  const db = await openDatabase('url' in target ? { url: target.url, schema: target.schema } : { dataDir: target.dataDir });
  try {
    await migrate(db, migrationSets());
    await seedRows(db, plan);
  } finally {
    await db.close();
  }
}

interface Place {
  id: string;
  latitude: number;
  longitude: number;
}

/** A machine of the demo fleet as pricing needs it. */
interface FleetMachine {
  id: string;
  hourlyRateCents: number;
  depotId: string;
}

/** The rows of one seeded booking and of the quote it was confirmed from. */
interface SeededBooking {
  quote: Record<string, unknown>;
  booking: Record<string, unknown>;
}

async function seedRows(db: Database, plan: SeedPlan): Promise<void> {
  const depots = (await db.query<Place>('SELECT id, latitude, longitude FROM rental_depots ORDER BY id')).rows;
  const locations = (await db.query<Place>('SELECT id, latitude, longitude FROM rental_locations ORDER BY id')).rows;
  const fleet = (await db.query<FleetMachine>(`SELECT id, hourly_rate_cents AS "hourlyRateCents", depot_id AS "depotId" FROM rental_machines ORDER BY id`))
    .rows;
  await seedPoolMachines(db, depots, plan.poolMachines);

  const quotes: Record<string, unknown>[] = [];
  const bookings: Record<string, unknown>[] = [];
  // Read before the pool was added: the demo fleet.
  const demo = fleet;
  const priced = pricedMachines(fleet, depots);
  for (let i = 1; i <= plan.bookings; i++) {
    const { quote, booking } = await seededBooking(i, demo, locations, priced);
    quotes.push(quote);
    bookings.push(booking);
  }
  const quoteColumns = Object.keys(quotes[0] ?? {});
  const bookingColumns = Object.keys(bookings[0] ?? {});
  for (let k = 0; k < quotes.length; k += 1000) {
    await insertJson(db, 'rental_quotes', quoteColumns, quotes.slice(k, k + 1000));
    await insertJson(db, 'rental_bookings', bookingColumns, bookings.slice(k, k + 1000));
  }
  if (bookings.length > 0) {
    await db.query(`SELECT setval(pg_get_serial_sequence('rental_bookings', 'seq'), (SELECT max(seq) FROM rental_bookings))`);
  }
  // Statistics, as autovacuum would gather them a minute after the load: the rounds measure the plans of a
  // database in use, not those made for tables never analyzed.
  await db.query('ANALYZE rental_machines, rental_quotes, rental_bookings, rental_booking_counts');
}

/** The machines EQ-100 .. of the mutation pool, available, spread over the depots. */
async function seedPoolMachines(db: Database, depots: readonly Place[], count: number): Promise<void> {
  const machines = Array.from({ length: count }, (_, k) => ({
    id: machineId(POOL_FIRST_MACHINE + k),
    name: `Pool unit ${POOL_FIRST_MACHINE + k}`,
    category: CATEGORIES[k % CATEGORIES.length]!,
    hourly_rate_cents: 4000 + (k % 7) * 500,
    depot_id: depots[k % depots.length]!.id,
    status: 'available',
  }));
  await insertJson(db, 'rental_machines', ['id', 'name', 'category', 'hourly_rate_cents', 'depot_id', 'status'], machines);
}

/** A machine of the fleet by its id, with its rate and where its depot is, as pricing takes it. */
function pricedMachines(fleet: readonly FleetMachine[], depots: readonly Place[]): (id: string) => PricedMachine {
  const depotById = new Map(depots.map((d) => [d.id, d]));
  return (id) => {
    const m = fleet.find((f) => f.id === id)!;
    const d = depotById.get(m.depotId)!;
    return { id, hourlyRateCents: m.hourlyRateCents, depotId: m.depotId, depot: { latitude: d.latitude, longitude: d.longitude } };
  };
}

/**
 * Booking `i` (1-based), completed: one or two machines of the demo fleet at one of the sites, quoted,
 * priced, planned and billed by the rental subgraph's own functions at instants derived from `i`.
 */
async function seededBooking(
  i: number,
  demo: readonly FleetMachine[],
  locations: readonly Place[],
  priced: (id: string) => PricedMachine,
): Promise<SeededBooking> {
  const first = demo[i % demo.length]!.id;
  const second = demo[(i * 7 + 3) % demo.length]!.id;
  const machineIds = i % 3 === 0 && second !== first ? [first, second].sort() : [first];
  const site = locations[i % locations.length]!;
  const createdAt = new Date(ANCHOR + i * 0.5 * HOUR);
  const startTime = new Date(createdAt.getTime() + (24 + (i % 200)) * HOUR);
  const durationHours = 4 + (i % 10) * 2;
  const inUse = i % 12;
  const price = priceQuote({
    machines: machineIds.map(priced),
    site: { latitude: site.latitude, longitude: site.longitude },
    startTime,
    durationHours,
    countsAfter: { available: 15 - inUse - machineIds.length, reserved: machineIds.length, inUse, total: 15 },
    pricedAt: createdAt,
  });
  const confirmedAt = new Date(createdAt.getTime() + 5 * 60_000);
  const completedAt = new Date(startTime.getTime() + (durationHours + (i % 4) * 0.5) * HOUR);
  const bill = closeBill({
    quotedHours: durationHours,
    subtotalCents: price.subtotalCents,
    totalCents: price.totalCents,
    rentalStart: new Date(Math.max(startTime.getTime(), confirmedAt.getTime())),
    completedAt,
  });
  const quoteId = seededQuoteId(i);
  const quote = {
    id: quoteId,
    status: 'confirmed',
    machine_ids: machineIds,
    location_id: site.id,
    start_time: startTime.toISOString(),
    duration_hours: durationHours,
    tenant: DEMO_PRINCIPAL.tenant,
    principal: DEMO_PRINCIPAL.id,
    utilization: price.utilization,
    surge_multiplier: price.surgeMultiplier,
    lead_time_hours: price.leadTimeHours,
    lead_time_factor: price.leadTimeFactor,
    line_items: price.lineItems,
    deliveries: price.deliveries,
    subtotal_cents: price.subtotalCents,
    delivery_cents: price.deliveryCents,
    total_cents: price.totalCents,
    currency: 'EUR',
    // Seeded quotes carry no signature: no workload reads it.
    signature: 'unsigned-benchmark-seed',
    created_at: createdAt.toISOString(),
    expires_at: new Date(createdAt.getTime() + 120_000).toISOString(),
  };
  const booking = {
    seq: i,
    id: seededBookingId(i),
    tenant: DEMO_PRINCIPAL.tenant,
    principal: DEMO_PRINCIPAL.id,
    quote_id: quoteId,
    customer_name: `Customer ${String(i % 97).padStart(2, '0')}`,
    status: 'completed',
    machine_ids: machineIds,
    location_id: site.id,
    start_time: startTime.toISOString(),
    duration_hours: durationHours,
    confirmed_at: confirmedAt.toISOString(),
    completed_at: completedAt.toISOString(),
    legs: await planLegs({ runs: price.deliveries, confirmedAt, startTime, expiresAt: confirmedAt, forecast: byRule }),
    quoted_cents: price.totalCents,
    actual_hours: bill.actualHours,
    billable_hours: bill.billableHours,
    overtime_cents: bill.overtimeCents,
    final_cents: bill.finalCents,
    tracking_status: 'completed',
    tracking_at: completedAt.toISOString(),
  };
  return { quote, booking };
}

/** One INSERT of many rows, sent as one JSON parameter and typed by the table's own row type. */
async function insertJson(db: Database, table: string, columns: string[], rows: Record<string, unknown>[]): Promise<void> {
  if (rows.length === 0) return;
  const list = columns.join(', ');
  await db.query(`INSERT INTO ${table} (${list}) SELECT ${list} FROM json_populate_recordset(NULL::${table}, $1::json)`, [JSON.stringify(rows)]);
}
