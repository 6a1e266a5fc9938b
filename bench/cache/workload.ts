import type { ReadAnswer } from './stale.js';

/*
 * The dashboard of `npm run bench -- cache`: its operations, as the load generator (bench/cache/load.ts)
 * sends them, and how each read's answer is reduced to what the stale-read check judges.
 */

/** Bookings a writer holds before it completes its oldest: the machines in use stay bounded. */
export const MAX_ACTIVE = 2;
/** Machines of a writer's own: its bookings' and its quote's. */
export const MACHINES_PER_WRITER = MAX_ACTIVE + 1;
/** Writes as a share of all requests. */
export const WRITE_SHARE = 0.05;

/** Bookings on the ledger page a dashboard shows (newest first). */
const LEDGER_PAGE = 50;

/** The reads, in the order each client cycles through them (equal shares). */
export const READ_KINDS = ['fleet', 'machines', 'bookings', 'delivery'] as const;
export type ReadKind = (typeof READ_KINDS)[number];

const READS: Record<ReadKind, string> = {
  fleet: 'query Fleet { fleetSummary { available reserved inUse total utilization surgeMultiplier } }',
  machines: 'query Machines { machines { id name category status depot { id } } }',
  bookings: `query Ledger { bookings(first: ${LEDGER_PAGE}) { totalCount edges { node { id status customerName startTime machines { id } } } } }`,
  delivery: `query Delivery($id: ID!) { booking(id: $id) { id status tracking { status eta etaQ10 etaQ90 minutesRemaining distanceRemainingKm } } }`,
};

const QUOTE = `mutation Quote($input: CreateQuoteInput!) { createQuote(input: $input) { id status machines { id status } } }`;
const CONFIRM = `mutation Confirm($input: ConfirmBookingInput!) { confirmBooking(input: $input) { id status machines { id status } } }`;
const COMPLETE = `mutation Complete($id: ID!) { completeBooking(bookingId: $id) { id status machines { id status } } }`;

/** One HTTP request of the workload. */
export interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

const graphql = (query: string, variables?: Record<string, unknown>): Call => ({
  method: 'POST',
  path: '/graphql',
  body: JSON.stringify(variables ? { query, variables } : { query }),
});

/** The read of `kind` (a delivery reads booking `bookingId`). */
export function readCall(kind: ReadKind, bookingId?: string): Call {
  return kind === 'delivery' ? graphql(READS.delivery, { id: bookingId }) : graphql(READS[kind]);
}

/** A quote's start: two days ahead on the hour, so its machines can always be on site by then. */
function startTime(): string {
  return new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 48 * 3_600_000).toISOString();
}

/** A delivery site for the machine (six sites, spread by machine number). */
const siteOf = (machine: string) => `LOC-00${1 + (Number(machine.slice(3)) % 6)}`;

/** The writes, over GraphQL or over the REST paths (docs/rental.md). */
export const writeCalls = {
  quote: (machine: string, rest: boolean): Call => {
    const input = { machineIds: [machine], locationId: siteOf(machine), startTime: startTime(), durationHours: 4 };
    return rest
      ? {
          method: 'POST',
          path: '/rental/pricing/quote',
          body: JSON.stringify({
            machine_ids: input.machineIds,
            location_id: input.locationId,
            start_time: input.startTime,
            duration_hours: input.durationHours,
          }),
        }
      : graphql(QUOTE, { input });
  },
  confirm: (quoteId: string, rest: boolean): Call =>
    rest
      ? { method: 'POST', path: '/rental/booking/confirm', body: JSON.stringify({ quote_id: quoteId, customer_name: 'Dashboard customer' }) }
      : graphql(CONFIRM, { input: { quoteId, customerName: 'Dashboard customer' } }),
  complete: (bookingId: string, rest: boolean): Call =>
    rest ? { method: 'POST', path: `/rental/booking/${bookingId}/complete` } : graphql(COMPLETE, { id: bookingId }),
};

/** The id a write's successful answer names (the quote's or the booking's), over GraphQL or REST. */
export function writtenId(kind: 'quote' | 'confirm' | 'complete', rest: boolean, body: any): string | undefined {
  if (rest) return kind === 'quote' ? body?.quote_id : body?.booking_id;
  const field = { quote: 'createQuote', confirm: 'confirmBooking', complete: 'completeBooking' }[kind];
  return body?.data?.[field]?.id;
}

/** A read's answer as the stale-read check takes it. */
export function readAnswer(kind: ReadKind, body: any, bookingId?: string): ReadAnswer {
  const data = body?.data;
  if (kind === 'bookings') {
    const page = data.bookings;
    return { kind, first: LEDGER_PAGE, totalCount: page.totalCount, edges: page.edges.map((e: any) => ({ id: e.node.id, status: e.node.status })) };
  }
  if (kind === 'delivery') {
    const booking = data.booking;
    return { kind, bookingId: bookingId!, booking: booking ? { status: booking.status, trackingStatus: booking.tracking.status } : null };
  }
  if (kind === 'machines') return { kind, machines: data.machines.map((m: any) => ({ id: m.id, status: m.status })) };
  return { kind };
}
