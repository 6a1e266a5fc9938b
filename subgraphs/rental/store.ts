import { randomBytes, randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../../platform/db.js';
import { domainError } from '../../platform/errors.js';
import { appendEvents, lockCommitOrder, type OutboxEvent } from '../../platform/outbox.js';
import { viewedTenant, type Owner, type Viewer } from '../../platform/ownership.js';
import { readingOnly, stateTag, unobservedWrite } from '../../platform/state-trace.js';
import { surgeMultiplier, utilizationOf, type Bill, type FleetCounts } from './pricing.js';
import {
  STATE_TYPES,
  TOPICS,
  type BookingRecord,
  type FleetSummaryRecord,
  type MachineRecord,
  type MachineStatus,
  type MachineStatusEvent,
  type Place,
  type QuoteRecord,
} from './records.js';
import { criticalLeg, type PlannedLeg, type TrackingEventPayload, type TrackingStatus } from './tracking.js';

/** The state types of the tables written here (platform/state-trace.ts): what reads depend on, what events' tags name. */
const { machine: MACHINE, quote: QUOTE, booking: BOOKING } = STATE_TYPES;

const MACHINE_COLUMNS = `id, name, category, hourly_rate_cents AS "hourlyRateCents", depot_id AS "depotId", status,
  reserved_until AS "reservedUntil"`;
const QUOTE_COLUMNS = `id::text AS id, tenant, principal, status, machine_ids AS "machineIds", location_id AS "locationId",
  start_time AS "startTime", duration_hours AS "durationHours", utilization, surge_multiplier AS "surgeMultiplier",
  lead_time_hours AS "leadTimeHours", lead_time_factor AS "leadTimeFactor", line_items AS "lineItems",
  deliveries, subtotal_cents AS "subtotalCents", delivery_cents AS "deliveryCents", total_cents AS "totalCents",
  currency, signature, created_at AS "createdAt", expires_at AS "expiresAt"`;
/** Booking columns, optionally qualified by a table alias. */
const bookingColumns = (t = '') => `${t}seq::text AS seq, ${t}id, ${t}tenant, ${t}principal, ${t}quote_id::text AS "quoteId",
  ${t}customer_name AS "customerName", ${t}status, ${t}machine_ids AS "machineIds", ${t}location_id AS "locationId",
  ${t}start_time AS "startTime", ${t}duration_hours AS "durationHours", ${t}confirmed_at AS "confirmedAt",
  ${t}completed_at AS "completedAt", ${t}legs, ${t}quoted_cents AS "quotedCents", ${t}actual_hours AS "actualHours",
  ${t}billable_hours AS "billableHours", ${t}overtime_cents AS "overtimeCents", ${t}final_cents AS "finalCents"`;
const BOOKING_COLUMNS = bookingColumns();

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const keyReused = () =>
  domainError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request; send a new key for a new request');

/** A booking on its way, with what the tracker last published for it. */
export type TrackedBooking = BookingRecord & { trackingStatus: TrackingStatus; trackingAt: Date };

export interface RentalStoreOptions {
  /** Called after a transaction that wrote events has committed (wakes the local event hub). */
  onEvents?: () => void;
}

/** A machine of the catalogue, with its rate and its depot's coordinates (what a quote is priced from). */
export interface CatalogueMachine {
  id: string;
  hourlyRateCents: number;
  depotId: string;
  depot: { latitude: number; longitude: number };
}

/** A quote's priced and signed terms (gateway of the rules: subgraphs/rental/service.ts). */
export interface QuoteTerms {
  locationId: string;
  startTime: Date;
  durationHours: number;
  utilization: number;
  surgeMultiplier: number;
  leadTimeHours: number;
  leadTimeFactor: number;
  lineItems: unknown;
  deliveries: unknown;
  subtotalCents: number;
  deliveryCents: number;
  totalCents: number;
  currency: string;
  signature: string;
  expiresAt: Date;
}

/** A confirm as the service hands it to the store (RentalService.confirmBooking). */
interface ConfirmQuoteInput {
  quoteId: string;
  customerName: string;
  idempotencyKey: string | null;
  /** The request as its Idempotency-Key remembers it (subgraphs/rental/service.ts). */
  fingerprint: string;
  now: Date;
  viewer: Viewer;
  /** The delivery plan, forecast from the quote's terms before the transaction; null when the quote was not active. */
  planned: PlannedLeg[] | null;
  /** The new booking's tracking: its status and the event announcing it. */
  tracking: (bookingId: string, legs: PlannedLeg[], locationId: string) => { status: TrackingStatus; payload: TrackingEventPayload };
}

export class RentalStore {
  private constructor(
    private readonly db: Database,
    private readonly options: RentalStoreOptions,
    /** Depots and sites are reference data fixed by migrations: read once, at open. */
    private readonly places: { depots: Map<string, Place>; locations: Map<string, Place> },
  ) {}

  static async open(db: Database, options: RentalStoreOptions = {}): Promise<RentalStore> {
    const [depots, locations] = await Promise.all([readPlaces(db, 'rental_depots'), readPlaces(db, 'rental_locations')]);
    return new RentalStore(db, options, {
      depots: new Map(depots.map((p) => [p.id, p])),
      locations: new Map(locations.map((p) => [p.id, p])),
    });
  }

  /** Runs a transaction and, once it has committed, announces its events locally. */
  private async transact<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const result = await this.db.transaction(fn);
    this.options.onEvents?.();
    return result;
  }

  /** The site and depots a booking's delivery plan refers to. */
  trackingPlaces(locationId: string) {
    const { depots, locations } = this.places;
    const site = locations.get(locationId);
    if (!site) throw new Error(`unknown location ${locationId}`);
    return {
      site,
      depot: (id: string) => {
        const depot = depots.get(id);
        if (!depot) throw new Error(`unknown depot ${id}`);
        return depot;
      },
    };
  }

  /** The newest event cursor ("0" before the first event). */
  async eventCursor(): Promise<string> {
    const res = await this.db.query<{ id: string | null }>('SELECT max(id)::text AS id FROM outbox');
    return res.rows[0]?.id ?? '0';
  }

  /** Bookings on their way (confirmed, not yet on site), with what the tracker last published for each. */
  async activeTrackedBookings(): Promise<TrackedBooking[]> {
    const res = await this.db.query<TrackedBooking>(
      `SELECT ${BOOKING_COLUMNS}, tracking_status AS "trackingStatus", tracking_at AS "trackingAt"
       FROM rental_bookings WHERE status = 'confirmed' AND tracking_status <> 'on_site'`,
    );
    return res.rows;
  }

  /**
   * Publishes a booking's due tracking events and its new status, unless another instance did first: the
   * update is conditional on (tracking_status, tracking_at) as read, so each update is published once.
   * What it writes is the tracker's own bookkeeping (what it published last, and when), which no answer
   * reads (a booking's tracking is computed from its plan and the clock): an unobserved write, its events
   * publications that change no state (untagged).
   */
  async claimTracking(booking: TrackedBooking, status: TrackingStatus, payloads: readonly TrackingEventPayload[], now: Date): Promise<boolean> {
    return unobservedWrite(() => this.claimTrackingUnobserved(booking, status, payloads, now));
  }

  private claimTrackingUnobserved(booking: TrackedBooking, status: TrackingStatus, payloads: readonly TrackingEventPayload[], now: Date): Promise<boolean> {
    return this.transact(async (tx) => {
      const claimed = await tx.query(
        `UPDATE rental_bookings SET tracking_status = $2, tracking_at = $3
         WHERE id = $1 AND status = 'confirmed' AND tracking_status = $4 AND tracking_at = $5`,
        [booking.id, status, now, booking.trackingStatus, booking.trackingAt],
      );
      if (claimed.rowCount !== 1) return false;
      await appendEvents(
        tx,
        payloads.map((payload) => trackingEvent(booking.id, payload, ownerFields(booking))),
      );
      return true;
    });
  }

  /**
   * Stores a booking's new delivery plan, and the update announcing it (null: announced by its status
   * change instead), unless another instance rewrote the plan first (conditional on the plan as read).
   * The plan is what the booking's tracking is computed from: its change is announced to the state
   * caches by a delivery plan event, whether or not a tracking update goes with it.
   */
  async replanLegs(booking: TrackedBooking, legs: readonly PlannedLeg[], update: TrackingEventPayload | null, now: Date): Promise<boolean> {
    return this.transact(async (tx) => {
      // Read under lock first: a plan another instance rewrote is left as it is, with nothing written.
      const current = await tx.query(`SELECT 1 FROM rental_bookings WHERE id = $1 AND status = 'confirmed' AND legs = $2::jsonb FOR UPDATE`, [
        booking.id,
        JSON.stringify(booking.legs),
      ]);
      if (current.rowCount !== 1) return false;
      await tx.query(
        `UPDATE rental_bookings SET legs = $2::jsonb, tracking_at = CASE WHEN $3::boolean THEN $4::timestamptz ELSE tracking_at END WHERE id = $1`,
        [booking.id, JSON.stringify(legs), update !== null, now],
      );
      const owner = ownerFields(booking);
      await appendEvents(tx, [deliveryPlanEvent(booking.id, legs, now, owner), ...(update ? [trackingEvent(booking.id, update, owner)] : [])]);
      return true;
    });
  }

  // ---- reads -------------------------------------------------------------------------------------

  /**
   * The whole fleet as of `now`, as releasing the expired quotes first and then reading would answer it:
   * each machine's reservation expiry comes with it, and only when one is past are the expired released
   * (releaseDue) and the machines read again.
   */
  async machines(now: Date): Promise<MachineRecord[]> {
    const read = async () => (await this.db.query<MachineRecord>(`SELECT ${MACHINE_COLUMNS} FROM rental_machines ORDER BY id`)).rows.map(machineOf);
    const machines = await read();
    if (!machines.some((m) => isDue(m.reservedUntil, now))) return machines;
    await this.releaseDue(now);
    return read();
  }

  /** The machines of these ids (unknown ids are left out): an answer depends on these machines alone. */
  async machinesByIds(ids: readonly string[]): Promise<MachineRecord[]> {
    const res = await readingOnly(
      ids.map((id) => stateTag.key(MACHINE, id)),
      () => this.db.query<MachineRecord>(`SELECT ${MACHINE_COLUMNS} FROM rental_machines WHERE id = ANY($1)`, [[...ids]]),
    );
    return res.rows.map(machineOf);
  }

  depots(): Place[] {
    return [...this.places.depots.values()];
  }

  locations(): Place[] {
    return [...this.places.locations.values()];
  }

  depot(id: string): Place | null {
    return this.places.depots.get(id) ?? null;
  }

  location(id: string): Place | null {
    return this.places.locations.get(id) ?? null;
  }

  /**
   * The fleet's summary as of `now`, as releasing the expired quotes first and then counting would answer
   * it, with the earliest expiry of a reservation (until when it holds; null: none reserved): the counts
   * and that expiry are read in one statement of the machines alone, and only when a reservation is past
   * its expiry are the expired released (releaseDue) and the machines counted again. So the summary is one
   * round trip whenever nothing is due, and on the embedded database a read kept until the next write (no
   * clock in the statement: the clock is compared here).
   */
  async fleetSummary(now: Date): Promise<{ summary: FleetSummaryRecord; reservedUntil: Date | null }> {
    const read = async () => {
      const res = await this.db.query<FleetCounts & { earliest: Date | string | null }>(
        `SELECT ${FLEET_COUNTS}, min(reserved_until) AS earliest FROM rental_machines`,
      );
      const { earliest, ...counts } = res.rows[0]!;
      return { summary: summaryOf(counts), reservedUntil: dateOrNull(earliest) };
    };
    const fleet = await read();
    if (!isDue(fleet.reservedUntil, now)) return fleet;
    await this.releaseDue(now);
    return read();
  }

  /** The quotes among `ids` that `viewer` may see (another tenant's are left out, as unknown ids are). */
  async quotesByIds(ids: readonly string[], viewer: Viewer): Promise<QuoteRecord[]> {
    const valid = ids.filter((id) => UUID_RE.test(id));
    if (valid.length === 0) return [];
    const sql = `SELECT ${QUOTE_COLUMNS} FROM rental_quotes WHERE id = ANY($1::uuid[]) AND ($2::text IS NULL OR tenant = $2)`;
    const res = await readingOnly(
      valid.map((id) => stateTag.key(QUOTE, id)),
      () => this.db.query<QuoteRecord>(sql, [valid, viewedTenant(viewer)]),
    );
    return res.rows;
  }

  async bookingsByIds(ids: readonly string[], viewer: Viewer): Promise<BookingRecord[]> {
    const sql = `SELECT ${BOOKING_COLUMNS} FROM rental_bookings WHERE id = ANY($1) AND ($2::text IS NULL OR tenant = $2)`;
    const res = await readingOnly(
      ids.map((id) => stateTag.key(BOOKING, id)),
      () => this.db.query<BookingRecord>(sql, [[...ids], viewedTenant(viewer)]),
    );
    return res.rows;
  }

  async bookingsByQuoteIds(quoteIds: readonly string[], viewer: Viewer): Promise<BookingRecord[]> {
    const valid = quoteIds.filter((id) => UUID_RE.test(id));
    if (valid.length === 0) return [];
    const sql = `SELECT ${BOOKING_COLUMNS} FROM rental_bookings WHERE quote_id = ANY($1::uuid[]) AND ($2::text IS NULL OR tenant = $2)`;
    return (await tenantsRows(BOOKING, viewer, () => this.db.query<BookingRecord>(sql, [valid, viewedTenant(viewer)]))).rows;
  }

  /** Newest first; `beforeSeq` is the exclusive upper bound from the previous page's cursor. */
  async bookingsPage(first: number, beforeSeq: string | null, viewer: Viewer): Promise<{ rows: BookingRecord[]; hasNext: boolean }> {
    const res = await tenantsRows(BOOKING, viewer, () =>
      this.db.query<BookingRecord>(
        `SELECT ${BOOKING_COLUMNS} FROM rental_bookings WHERE ($1::bigint IS NULL OR seq < $1::bigint)
           AND ($3::text IS NULL OR tenant = $3)
         ORDER BY rental_bookings.seq DESC LIMIT $2`,
        [beforeSeq, first + 1, viewedTenant(viewer)],
      ),
    );
    return { rows: res.rows.slice(0, first), hasNext: res.rows.length > first };
  }

  /**
   * How many bookings `viewer` sees in the ledger: read from the counts the bookings' triggers keep
   * (migrations/008_booking_counts.sql), at most 16 rows per tenant, whatever the ledger's length.
   */
  async bookingsTotal(viewer: Viewer): Promise<number> {
    const res = await tenantsRows(BOOKING, viewer, () =>
      this.db.query<{ n: number }>('SELECT coalesce(sum(bookings), 0)::int AS n FROM rental_booking_counts WHERE $1::text IS NULL OR tenant = $1', [
        viewedTenant(viewer),
      ]),
    );
    return res.rows[0]?.n ?? 0;
  }

  // ---- transitions -------------------------------------------------------------------------------

  /**
   * Expires every active quote past its expiry and releases its machines, in one transaction.
   * Run by the sweeper and before a quote is made or confirmed. A read of the machines, the fleet or a
   * quote checks the reservations it shows instead (their expiry is on the machines' rows, the quote's on
   * its own), so that what it depends on is those rows alone, and releases (releaseDue) when one is due.
   */
  async releaseExpired(now: Date): Promise<number> {
    // The earliest expiry of an active quote does not depend on the clock, so on the embedded database it
    // is read from memory until the next write (platform/read-cache.ts); the clock is compared here.
    const due = await this.db.query<{ earliest: Date | string | null }>(EARLIEST_ACTIVE_EXPIRY);
    return isDue(due.rows[0]?.earliest, now) ? this.releaseDue(now) : 0;
  }

  /**
   * The release itself, once a quote is known to be past its expiry: the quotes expired and their machines
   * freed. The due quotes are locked first (a release that ran meanwhile, on another instance or the
   * sweeper, leaves none), and nothing is written when none is left.
   */
  releaseDue(now: Date): Promise<number> {
    return this.transact(async (tx) => {
      const due = await tx.query<{ id: string; tenant: string; principal: string }>(
        `SELECT id::text AS id, tenant, principal FROM rental_quotes WHERE status = 'active' AND expires_at <= $1 ORDER BY id FOR UPDATE`,
        [now],
      );
      if (due.rowCount === 0) return 0;
      const released = await tx.query<{ machineId: string; quoteId: string; tenant: string; principal: string }>(
        `WITH expired AS (
           UPDATE rental_quotes SET status = 'expired', released_at = $1
           WHERE id = ANY($2::uuid[]) RETURNING id, tenant, principal
         )
         UPDATE rental_machines m SET status = 'available', quote_id = NULL, updated_at = $1
         FROM expired e WHERE m.quote_id = e.id AND m.status = 'reserved'
         RETURNING m.id AS "machineId", e.id::text AS "quoteId", e.tenant, e.principal`,
        [now, due.rows.map((r) => r.id)],
      );
      // Each expired quote's tags ride on its machines' events; a quote whose machines another write already
      // took back (none left reserved by it) is told by an event of its own: its status changed all the same.
      const told = new Set(released.rows.map((r) => r.quoteId));
      await appendEvents(tx, [
        ...released.rows.map((r) =>
          machineEvent(r.machineId, 'reserved', 'available', 'expiry', now, { quoteId: r.quoteId }, { tenant: r.tenant, principal: r.principal }),
        ),
        ...due.rows.filter((q) => !told.has(q.id)).map((q) => quoteExpiredEvent(q.id, now, { tenant: q.tenant, principal: q.principal })),
        await fleetEvent(tx, now),
      ]);
      return released.rowCount;
    });
  }

  /** The machines among `ids` with their rates and depots (unknown ids are left out). */
  async catalogue(ids: readonly string[]): Promise<CatalogueMachine[]> {
    const res = await this.db.query<{ id: string; hourlyRateCents: number; depotId: string; latitude: number; longitude: number }>(
      `SELECT m.id, m.hourly_rate_cents AS "hourlyRateCents", m.depot_id AS "depotId", d.latitude, d.longitude
       FROM rental_machines m JOIN rental_depots d ON d.id = m.depot_id WHERE m.id = ANY($1)`,
      [[...ids]],
    );
    return res.rows.map((m) => ({ id: m.id, hourlyRateCents: m.hourlyRateCents, depotId: m.depotId, depot: { latitude: m.latitude, longitude: m.longitude } }));
  }

  /**
   * Reserves the machines for a new quote and stores it, in one transaction: a machine another quote or
   * booking holds is a CONFLICT naming it. `terms` prices and signs the quote from the fleet as this
   * reservation leaves it, counted in commit order (under the lock, every quote committed before this one
   * is counted, so concurrent quotes see utilization climb one after another).
   */
  async reserveQuote(input: {
    machineIds: readonly string[];
    now: Date;
    /** Whose the quote is: the requesting principal, in its tenant. */
    owner: Owner;
    terms: (quoteId: string, machineIds: string[], countsAfter: FleetCounts) => Promise<QuoteTerms>;
  }): Promise<QuoteRecord> {
    const { now } = input;
    return this.transact(async (tx) => {
      const quoteId = randomUUID();
      // Lock in id order so overlapping quotes cannot deadlock; rows taken meanwhile drop out of the filter.
      const reserved = await tx.query<{ id: string }>(
        `UPDATE rental_machines m SET status = 'reserved', quote_id = $2, updated_at = $3
         FROM (SELECT id FROM rental_machines WHERE id = ANY($1) AND status = 'available' ORDER BY id FOR UPDATE) pick
         WHERE m.id = pick.id RETURNING m.id`,
        [[...input.machineIds], quoteId, now],
      );
      if (reserved.rowCount !== input.machineIds.length) {
        const taken = await tx.query<{ id: string; status: string }>(
          `SELECT id, status FROM rental_machines WHERE id = ANY($1) AND NOT (id = ANY($2)) ORDER BY id`,
          [[...input.machineIds], reserved.rows.map((r) => r.id)],
        );
        const list = taken.rows.map((r) => `${r.id} (${r.status})`).join(', ');
        throw domainError('CONFLICT', `Machine${taken.rows.length > 1 ? 's' : ''} not available: ${list}`);
      }
      await lockCommitOrder(tx);
      const countsAfter = await fleetCounts(tx);
      const machineIds = [...input.machineIds].sort();
      const t = await input.terms(quoteId, machineIds, countsAfter);
      const inserted = await tx.query<QuoteRecord>(
        `INSERT INTO rental_quotes (id, tenant, principal, status, machine_ids, location_id, start_time, duration_hours, utilization,
           surge_multiplier, lead_time_hours, lead_time_factor, line_items, deliveries, subtotal_cents, delivery_cents,
           total_cents, currency, signature, created_at, expires_at)
         VALUES ($1, $19, $20, 'active', $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb, $12, $13, $14, $15, $16, $17, $18)
         RETURNING ${QUOTE_COLUMNS}`,
        [
          quoteId,
          machineIds,
          t.locationId,
          t.startTime,
          t.durationHours,
          t.utilization,
          t.surgeMultiplier,
          t.leadTimeHours,
          t.leadTimeFactor,
          JSON.stringify(t.lineItems),
          JSON.stringify(t.deliveries),
          t.subtotalCents,
          t.deliveryCents,
          t.totalCents,
          t.currency,
          t.signature,
          now,
          t.expiresAt,
          input.owner.tenant,
          input.owner.principal,
        ],
      );
      await appendEvents(tx, [
        ...machineIds.map((id) => machineEvent(id, 'available', 'reserved', 'quote', now, { quoteId }, input.owner)),
        fleetEventFrom(countsAfter, now),
      ]);
      return inserted.rows[0]!;
    });
  }

  /** An active quote's fixed terms, as `viewer` may see it (null: none such). */
  async activeQuoteTerms(quoteId: string, viewer: Viewer): Promise<Pick<QuoteRecord, 'deliveries' | 'startTime' | 'expiresAt'> | null> {
    const res = await this.db.query<Pick<QuoteRecord, 'deliveries' | 'startTime' | 'expiresAt'>>(
      `SELECT deliveries, start_time AS "startTime", expires_at AS "expiresAt" FROM rental_quotes
       WHERE id = $1 AND status = 'active' AND ($2::text IS NULL OR tenant = $2)`,
      [quoteId, viewedTenant(viewer)],
    );
    return res.rows[0] ?? null;
  }

  /**
   * Confirms a quote into a booking. A repeated Idempotency-Key with the same request (same fingerprint)
   * returns the booking it made; with a different request it is IDEMPOTENCY_KEY_REUSED. Any other second
   * confirm of the same quote is a CONFLICT, so one quote never yields two bookings. The key and the
   * fingerprint are inserted with the booking, in its transaction: a concurrent request with the same
   * key waits on that insert (the unique key) or on the quote's row, then reads the committed booking.
   */
  async confirmQuote(input: ConfirmQuoteInput): Promise<BookingRecord> {
    const { now, quoteId, idempotencyKey, viewer, fingerprint } = input;
    try {
      return await this.transact(async (tx) => {
        const replay = await this.bookingForKey(tx, idempotencyKey, quoteId, fingerprint, viewer);
        if (replay) return replay;
        // Locked before it is written: a quote that is not active is answered with nothing written.
        const active = await tx.query(
          `SELECT 1 FROM rental_quotes WHERE id = $1 AND status = 'active' AND expires_at > $2 AND ($3::text IS NULL OR tenant = $3) FOR UPDATE`,
          [quoteId, now, viewedTenant(viewer)],
        );
        if (active.rowCount !== 1) return this.answerForInactiveQuote(tx, input);
        const quote = (await tx.query<QuoteRecord>(`UPDATE rental_quotes SET status = 'confirmed' WHERE id = $1 RETURNING ${QUOTE_COLUMNS}`, [quoteId]))
          .rows[0]!;
        return this.book(tx, quote, input);
      });
    } catch (error) {
      // Another confirm with this key committed while this one ran (its insert waited on the unique key):
      // this transaction is rolled back, and the committed booking decides.
      if ((error as { code?: string }).code === '23505' && idempotencyKey !== null) {
        const raced = await this.bookingForKey(this.db, idempotencyKey, quoteId, fingerprint, viewer);
        if (raced) return raced;
      }
      if ((error as { code?: string }).code === '23505') throw domainError('CONFLICT', `Quote ${quoteId} was confirmed by a concurrent request`);
      throw error;
    }
  }

  /**
   * The answer to a confirm whose quote was not active: the booking a concurrent confirm with the same
   * key committed while this one waited; otherwise 404 (unknown, or another tenant's), 409 (already
   * confirmed) or 410 (expired).
   */
  private async answerForInactiveQuote(tx: Queryable, input: ConfirmQuoteInput): Promise<BookingRecord> {
    const { quoteId, idempotencyKey, fingerprint, viewer } = input;
    const found = (
      await tx.query<{ status: string; expiresAt: Date; bookingId: string | null }>(
        `SELECT q.status, q.expires_at AS "expiresAt", b.id AS "bookingId"
         FROM rental_quotes q LEFT JOIN rental_bookings b ON b.quote_id = q.id
         WHERE q.id = $1 AND ($2::text IS NULL OR q.tenant = $2)`,
        [quoteId, viewedTenant(viewer)],
      )
    ).rows[0];
    if (!found) throw domainError('NOT_FOUND', `Quote ${quoteId} not found`);
    if (found.status === 'confirmed') {
      const raced = await this.bookingForKey(tx, idempotencyKey, quoteId, fingerprint, viewer);
      if (raced) return raced;
      throw domainError('CONFLICT', `Quote ${quoteId} is already confirmed as booking ${found.bookingId ?? ''}`.trim());
    }
    throw domainError('GONE', `Quote ${quoteId} expired at ${found.expiresAt.toISOString()}`);
  }

  /**
   * The booking of a quote this transaction has just confirmed: its machines move from reserved to in use,
   * the booking is inserted with its delivery plan, tracking status and the request's key, and the
   * machine, fleet, booking and tracking events are appended (the quote's and the booking's tags on the
   * machine events, the booking's on its own; the ledger's counts are the booking's owner's rows).
   */
  private async book(tx: Queryable, quote: QuoteRecord, input: ConfirmQuoteInput): Promise<BookingRecord> {
    const { now, quoteId, idempotencyKey, viewer, fingerprint, planned } = input;
    const bookingId = `BK-${randomBytes(6).toString('hex').toUpperCase()}`;
    const moved = await tx.query<{ id: string }>(
      `UPDATE rental_machines SET status = 'in_use', quote_id = NULL, booking_id = $2, updated_at = $3
       WHERE quote_id = $1 AND status = 'reserved' RETURNING id`,
      [quoteId, bookingId, now],
    );
    if (moved.rowCount !== quote.machineIds.length) {
      throw new Error(`quote ${quoteId} held ${moved.rowCount} of its ${quote.machineIds.length} machines`);
    }
    if (!planned) throw new Error(`quote ${quoteId} was confirmed without a delivery plan`);
    const legs = planned;
    const tracking = input.tracking(bookingId, legs, quote.locationId);
    // The ledger pages by seq: draw it in commit order, so a client paging meanwhile never passes
    // over a booking whose number was drawn earlier but not yet committed.
    await lockCommitOrder(tx);
    const booking = (
      await tx.query<BookingRecord>(
        `INSERT INTO rental_bookings (id, tenant, principal, quote_id, idempotency_key, customer_name, status, machine_ids, location_id,
           start_time, duration_hours, confirmed_at, legs, quoted_cents, tracking_status, tracking_at, idempotency_fingerprint)
         VALUES ($1, $14, $15, $2, $3, $4, 'confirmed', $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $9, $13)
         RETURNING ${BOOKING_COLUMNS}`,
        [
          bookingId,
          quoteId,
          idempotencyKey,
          input.customerName,
          quote.machineIds,
          quote.locationId,
          quote.startTime,
          quote.durationHours,
          now,
          JSON.stringify(legs),
          quote.totalCents,
          tracking.status,
          idempotencyKey === null ? null : fingerprint,
          quote.tenant,
          viewer.owner.principal,
        ],
      )
    ).rows[0]!;
    const owner = { tenant: booking.tenant, principal: booking.principal };
    await appendEvents(tx, [
      ...quote.machineIds.map((id) => machineEvent(id, 'reserved', 'in_use', 'confirm', now, { quoteId, bookingId }, owner)),
      await fleetEvent(tx, now),
      bookingEvent(bookingId, 'confirmed', now, owner),
      trackingEvent(bookingId, tracking.payload, owner),
    ]);
    return booking;
  }

  /**
   * Completes a booking, releasing its machines, in one transaction; `close` bills it from its terms, and
   * `tracking` gives the event announcing it on site for good.
   */
  async completeBooking(input: {
    bookingId: string;
    now: Date;
    viewer: Viewer;
    close: (booking: BookingRecord & { subtotalCents: number }) => Bill;
    tracking: (booking: BookingRecord) => TrackingEventPayload;
  }): Promise<BookingRecord> {
    const { now, bookingId, viewer } = input;
    return this.transact(async (tx) => {
      const current = (
        await tx.query<BookingRecord & { subtotalCents: number }>(
          `SELECT ${bookingColumns('b.')},
             q.subtotal_cents AS "subtotalCents"
           FROM rental_bookings b JOIN rental_quotes q ON q.id = b.quote_id
           WHERE b.id = $1 AND ($2::text IS NULL OR b.tenant = $2) FOR UPDATE OF b`,
          [bookingId, viewedTenant(viewer)],
        )
      ).rows[0];
      if (!current) throw domainError('NOT_FOUND', `Booking ${bookingId} not found`);
      if (current.status === 'completed') {
        throw domainError('CONFLICT', `Booking ${bookingId} was already completed at ${current.completedAt?.toISOString()}`);
      }
      const bill = input.close(current);
      const booking = (
        await tx.query<BookingRecord>(
          `UPDATE rental_bookings SET status = 'completed', completed_at = $2, actual_hours = $3, billable_hours = $4,
             overtime_cents = $5, final_cents = $6, tracking_status = 'completed', tracking_at = $2
           WHERE id = $1 AND status = 'confirmed' RETURNING ${BOOKING_COLUMNS}`,
          [bookingId, now, bill.actualHours, bill.billableHours, bill.overtimeCents, bill.finalCents],
        )
      ).rows[0]!;
      const released = await tx.query<{ id: string }>(
        `UPDATE rental_machines SET status = 'available', booking_id = NULL, updated_at = $2
         WHERE booking_id = $1 AND status = 'in_use' RETURNING id`,
        [bookingId, now],
      );
      const owner = { tenant: booking.tenant, principal: booking.principal };
      await appendEvents(tx, [
        ...released.rows.map((r) => machineEvent(r.id, 'in_use', 'available', 'complete', now, { bookingId }, owner)),
        await fleetEvent(tx, now),
        bookingEvent(bookingId, 'completed', now, owner),
        trackingEvent(bookingId, input.tracking(booking), owner),
      ]);
      return booking;
    });
  }

  /** The booking an Idempotency-Key made, when the request matches the one it was made with. */
  private async bookingForKey(q: Queryable, key: string | null, quoteId: string, fingerprint: string, viewer: Viewer): Promise<BookingRecord | null> {
    if (!key) return null;
    // A key is the tenant's own (an operator's replay finds the booking whichever tenant it is for).
    const found = (
      await q.query<BookingRecord & { fingerprint: string | null }>(
        `SELECT ${BOOKING_COLUMNS}, idempotency_fingerprint AS fingerprint FROM rental_bookings
         WHERE idempotency_key = $1 AND ($2::text IS NULL OR tenant = $2) ORDER BY seq LIMIT 1`,
        [key, viewedTenant(viewer)],
      )
    ).rows[0];
    if (!found) return null;
    const { fingerprint: stored, ...booking } = found;
    // Bookings from before fingerprints were stored are matched by their quote alone.
    const same = stored === null ? found.quoteId === quoteId : stored === fingerprint;
    if (!same) throw keyReused();
    return booking;
  }
}

/** The fleet's counts by status, over rental_machines. */
const FLEET_COUNTS = `count(*) FILTER (WHERE status = 'available')::int AS available,
  count(*) FILTER (WHERE status = 'reserved')::int AS reserved,
  count(*) FILTER (WHERE status = 'in_use')::int AS "inUse",
  count(*)::int AS total`;

/** The earliest expiry of an active quote (null when none is active). */
const EARLIEST_ACTIVE_EXPIRY = `SELECT min(expires_at) AS earliest FROM rental_quotes WHERE status = 'active'`;

/** Whether an active quote whose expiry is `earliest` is past it at `now`. */
function isDue(earliest: Date | string | null | undefined, now: Date): boolean {
  return earliest !== null && earliest !== undefined && new Date(earliest).getTime() <= now.getTime();
}

async function fleetCounts(q: Queryable): Promise<FleetCounts> {
  const res = await q.query<FleetCounts>(`SELECT ${FLEET_COUNTS} FROM rental_machines`);
  return res.rows[0]!;
}

function summaryOf(counts: FleetCounts): FleetSummaryRecord {
  const utilization = utilizationOf(counts);
  // The surge a one-machine quote would see now: utilization with one more machine taken.
  const next = counts.available > 0 ? utilizationOf({ ...counts, reserved: counts.reserved + 1 }) : utilization;
  return { ...counts, utilization, surgeMultiplier: surgeMultiplier(next) };
}

/** Fleet state: every subscriber sees all of it. It changes with the machines (the fleet's summary is read from them all). */
function fleetEventFrom(counts: FleetCounts, at: Date): OutboxEvent {
  return {
    topic: TOPICS.fleetSummary,
    payload: { ...summaryOf(counts), at: at.toISOString() },
    audience: 'everyone',
    tags: [stateTag.collection(MACHINE)],
  };
}

/** A booking's own events: its tenant's alone. Tagged with the booking, whose row (and its owner's ledger count) it wrote. */
function bookingEvent(bookingId: string, status: 'confirmed' | 'completed', at: Date, owner: Owner): OutboxEvent {
  return {
    topic: TOPICS.booking,
    key: bookingId,
    payload: { bookingId, status, at: at.toISOString() },
    audience: { owner: ownerFields(owner), grain: 'tenant' },
    tags: rowTags(BOOKING, bookingId, owner),
  };
}

/**
 * A published tracking update: a booking's delivery as the clock moves it along its plan. It changes no
 * state any answer reads (the tracking an answer shows is computed from the plan and the clock, and holds
 * one tick, subgraphs/rental/tracking.ts `trackingHoldsUntil`): untagged. A write in its transaction is
 * tagged by its own event.
 */
function trackingEvent(bookingId: string, payload: TrackingEventPayload, owner: Owner): OutboxEvent<TrackingEventPayload> {
  return { topic: TOPICS.tracking, key: bookingId, payload, audience: { owner: ownerFields(owner), grain: 'tenant' }, tags: [] };
}

/** A booking's delivery plan forecast again: its tenant's alone, tagged with the booking whose plan it rewrote. */
function deliveryPlanEvent(bookingId: string, legs: readonly PlannedLeg[], at: Date, owner: Owner): OutboxEvent {
  return {
    topic: TOPICS.deliveryPlan,
    key: bookingId,
    payload: { bookingId, arriveAt: criticalLeg(legs).arriveAt, at: at.toISOString() },
    audience: { owner: ownerFields(owner), grain: 'tenant' },
    tags: rowTags(BOOKING, bookingId, owner),
  };
}

/** What a write to one owned row changed: its collection, the row, and its owner's rows. */
const rowTags = (type: string, key: string, owner: Owner): string[] => [stateTag.collection(type), stateTag.key(type, key), stateTag.owner(type, owner.tenant)];

/**
 * Runs a read of `type`'s rows limited to `viewer`'s tenant as depending on that tenant's rows alone
 * (every tenant's for an operator).
 */
function tenantsRows<T>(type: string, viewer: Viewer, read: () => Promise<T>): Promise<T> {
  const tenant = viewedTenant(viewer);
  return tenant === null ? read() : readingOnly([stateTag.owner(type, tenant)], read);
}

/** A machine row as read, its reservation's expiry a Date. */
const machineOf = (row: MachineRecord): MachineRecord => ({ ...row, reservedUntil: dateOrNull(row.reservedUntil) });

function dateOrNull(value: Date | string | null | undefined): Date | null {
  return value === null || value === undefined ? null : new Date(value);
}

/** Just the owner (a booking record passed as its owner carries much more). */
const ownerFields = (owner: Owner | { tenant: string; principal: string }): Owner => ({ tenant: owner.tenant, principal: owner.principal });

/**
 * The fleet after this transaction, counted under the commit-order lock: every writer that took the lock
 * earlier has committed, so the counts include them, and fleet events read in cursor order never go back.
 */
async function fleetEvent(tx: Queryable, at: Date): Promise<OutboxEvent> {
  await lockCommitOrder(tx);
  return fleetEventFrom(await fleetCounts(tx), at);
}

/**
 * A machine's status change, tagged with the machine and with the quote and booking it names: each
 * transition writes them too (a quote stored, confirmed or expired; a booking made or completed).
 */
/** A quote expired with no machine of its own left to tell of it. */
function quoteExpiredEvent(quoteId: string, at: Date, owner: Owner): OutboxEvent {
  return {
    topic: TOPICS.quoteExpired,
    key: quoteId,
    tags: rowTags(QUOTE, quoteId, owner),
    audience: { owner: ownerFields(owner), grain: 'tenant' },
    payload: { quoteId, status: 'expired', at: at.toISOString() },
  };
}

function machineEvent(
  machineId: string,
  previousStatus: MachineStatus,
  status: MachineStatus,
  reason: MachineStatusEvent['reason'],
  at: Date,
  refs: { quoteId?: string; bookingId?: string },
  owner: Owner,
): OutboxEvent<MachineStatusEvent> {
  return {
    topic: TOPICS.machineStatus,
    key: machineId,
    tags: [
      stateTag.collection(MACHINE),
      stateTag.key(MACHINE, machineId),
      ...(refs.quoteId ? rowTags(QUOTE, refs.quoteId, owner) : []),
      ...(refs.bookingId ? rowTags(BOOKING, refs.bookingId, owner) : []),
    ],
    // The fleet sees every machine's status; the quote or booking behind it is its tenant's alone.
    audience: { owner: ownerFields(owner), grain: 'tenant', private: ['quoteId', 'bookingId'] },
    payload: {
      machineId,
      previousStatus,
      status,
      reason,
      quoteId: refs.quoteId ?? null,
      bookingId: refs.bookingId ?? null,
      at: at.toISOString(),
    },
  };
}

async function readPlaces(db: Database, table: 'rental_depots' | 'rental_locations'): Promise<Place[]> {
  return (await db.query<Place>(`SELECT id, name, latitude, longitude FROM ${table} ORDER BY id`)).rows;
}
