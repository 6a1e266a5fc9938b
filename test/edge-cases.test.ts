import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../platform/clock.js';
import { gql, hoursFromNow, rest } from './support/http.js';
import { backends, startTestServer } from './support/server.js';

/** The largest amount an int4 column of cents can hold, in euros. */
const INT4_MAX_EUROS = 2_147_483_647 / 100;
const YEAR_MS = 365 * 86_400_000;

describe.each(backends)('edge cases at the input edge and in storage (%s)', (backend) => {
  let url: string;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  const clock = new OffsetClock();

  beforeAll(async () => {
    server = await startTestServer({ backend, clock });
    url = server.url;
  });

  const quote = (machineIds: string[], extra: Record<string, unknown> = {}) =>
    rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: machineIds,
      location_id: 'LOC-004',
      start_time: hoursFromNow(4, clock.now().getTime()),
      duration_hours: 8,
      ...extra,
    });

  describe('money beyond 32 bits', () => {
    it('a booking completed decades late closes its bill (bigint cents) and releases its machines', async () => {
      const late = new OffsetClock();
      const own = await startTestServer({ backend, clock: late });
      const q = await rest(own.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-009', 'EQ-008'],
        location_id: 'LOC-004',
        start_time: hoursFromNow(4, late.now().getTime()),
        duration_hours: 8,
      });
      expect(q.status).toBe(200);
      const b = await rest(own.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Forgetful BV' });
      expect(b.status).toBe(200);

      late.advance(30 * YEAR_MS);
      const done = await rest(own.url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`);
      expect(done.status).toBe(200);
      const bill = done.body['bill'];
      expect(bill['final_amount']).toBeGreaterThan(INT4_MAX_EUROS);
      expect(bill['final_amount']).toBeCloseTo(q.body['total'] + bill['overtime_amount'], 2);
      // Overtime: the quote's effective hourly rate (subtotal / hours) * 1.25 for every hour beyond the quote.
      const expectedOvertime = (q.body['subtotal'] / 8) * (bill['billable_hours'] - 8) * 1.25;
      expect(bill['overtime_amount']).toBeCloseTo(expectedOvertime, 0);

      const machines = await rest(own.url, 'GET', '/rental/fleet/machines');
      const status = (id: string) => machines.body['machines'].find((m: { id: string }) => m.id === id).status;
      expect([status('EQ-008'), status('EQ-009')]).toEqual(['available', 'available']);

      // Read back from storage: the ledger shows the same amounts.
      const ledger = await rest(own.url, 'GET', '/rental/bookings?limit=1');
      expect(ledger.body['bookings'][0]['bill']).toEqual(bill);
      await own.close();
    });

    it('int8 values read as JS numbers on both drivers, and a value beyond 2^53 is refused', async () => {
      const res = await server.db.query<{ n: unknown; big: unknown }>('SELECT count(*) AS n, 9007199254740991::int8 AS big FROM rental_machines');
      expect(res.rows[0]).toEqual({ n: 15, big: Number.MAX_SAFE_INTEGER });
      await expect(server.db.query('SELECT 9007199254740993::int8 AS x')).rejects.toThrow(/safe integer/);
      // The connection stays usable after the refusal.
      expect((await server.db.query<{ one: number }>('SELECT 1::int8 AS one')).rows[0]!.one).toBe(1);
    });
  });

  describe('input rules', () => {
    it('a rental shorter than 0.25 hours is refused, over REST and GraphQL', async () => {
      const tiny = await quote(['EQ-001'], { duration_hours: 0.0001 });
      expect(tiny.status).toBe(400);
      expect(tiny.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'duration_hours' }] });
      expect(tiny.body['errors'][0].message).toContain('0.25');
      const gqlTiny = await gql(url, `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`, {
        input: { machineIds: ['EQ-001'], locationId: 'LOC-004', startTime: hoursFromNow(4, clock.now().getTime()), durationHours: 0.2 },
      });
      expect(gqlTiny.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'durationHours' }] });
      // Nothing was reserved by the refused quotes; the shortest rental is accepted.
      const shortest = await quote(['EQ-001'], { duration_hours: 0.25 });
      expect(shortest.status).toBe(200);
      expect(shortest.body['line_items'][0]['amount']).toBeGreaterThan(0);
    });
  });
});
