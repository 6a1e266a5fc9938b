import { beforeAll, describe, expect, it } from 'vitest';
import { hoursFromNow, rest } from '../../support/http.js';
import { TEST_DATABASE_URL, backends, startTestServer } from '../../support/server.js';

/*
 * PGlite runs one transaction at a time, so on it these tests show serialization, not a race. The race
 * (50 transactions contending for one row) is only real on PostgreSQL: set TEST_DATABASE_URL.
 */
if (!TEST_DATABASE_URL) {
  console.warn('[concurrency] TEST_DATABASE_URL is not set: the PostgreSQL race tests are skipped; PGlite runs them serialized.');
}

describe.each(backends)('concurrent state changes (%s)', (backend) => {
  let url: string;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer({ backend });
    url = server.url;
  });

  const quoteBody = (ids: string[]) => ({
    machine_ids: ids,
    location_id: 'LOC-002',
    start_time: hoursFromNow(6),
    duration_hours: 12,
  });

  it('50 concurrent quotes for one machine: exactly one wins, 49 get 409', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, () => rest(url, 'POST', '/rental/pricing/quote', quoteBody(['EQ-001']))));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    const summary = await rest(url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ reserved: 1, available: 14 });
  });

  it('overlapping multi-machine quotes never share a machine and never deadlock', async () => {
    // The database layer retries a transaction that deadlocked, so the answers alone would not show
    // a deadlock: its retry counter must not move.
    const before = { ...server.db.retries };
    const sets = [
      ['EQ-002', 'EQ-003'],
      ['EQ-003', 'EQ-002'],
      ['EQ-003', 'EQ-004'],
      ['EQ-004', 'EQ-005'],
      ['EQ-005', 'EQ-002'],
    ];
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => rest(url, 'POST', '/rental/pricing/quote', quoteBody(sets[i % sets.length]!))));
    expect(results.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const won = results.filter((r) => r.status === 200).flatMap((r) => r.body['machine_ids'] as string[]);
    expect(new Set(won).size).toBe(won.length);
    const machines = await rest(url, 'GET', '/rental/fleet/machines');
    const reserved = machines.body['machines'].filter((m: { status: string }) => m.status === 'reserved').map((m: { id: string }) => m.id);
    expect(reserved.sort()).toEqual(['EQ-001', ...won].sort());
    expect(server.db.retries).toEqual(before);
  });

  it('20 concurrent confirms of one quote make exactly one booking', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', quoteBody(['EQ-010']));
    expect(q.status).toBe(200);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: `Racer ${i}` })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(19);
    const ledger = await rest(url, 'GET', '/rental/bookings?limit=100');
    expect(ledger.body['bookings'].filter((b: { quote_id: string }) => b.quote_id === q.body['quote_id'])).toHaveLength(1);
  });

  it('concurrent confirms sharing an Idempotency-Key all answer with the one booking', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', quoteBody(['EQ-011']));
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        rest(
          url,
          'POST',
          '/rental/booking/confirm',
          { quote_id: q.body['quote_id'], customer_name: 'Same Key BV' },
          { 'idempotency-key': `k-${q.body['quote_id']}` },
        ),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(results.map((r) => r.body['booking_id'])).size).toBe(1);
  });

  it('concurrent completes of one booking release its machines once', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', quoteBody(['EQ-012', 'EQ-013']));
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Finisher' });
    const bookingId: string = b.body['booking_id'];
    const results = await Promise.all(Array.from({ length: 10 }, () => rest(url, 'POST', `/rental/booking/${bookingId}/complete`)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(9);

    const machines = await rest(url, 'GET', '/rental/fleet/machines');
    const status = (id: string) => machines.body['machines'].find((m: { id: string }) => m.id === id).status;
    expect([status('EQ-012'), status('EQ-013')]).toEqual(['available', 'available']);
    const events = await server.db.query<{ topic: string; payload: Record<string, string> }>(
      `SELECT topic, payload FROM outbox WHERE key = $1 OR payload->>'bookingId' = $1 ORDER BY id`,
      [bookingId],
    );
    const completions = events.rows.filter((e) => e.topic === 'rental.machine_status' && e.payload['reason'] === 'complete');
    expect(completions.map((e) => [e.payload['machineId'], e.payload['previousStatus'], e.payload['status']]).sort()).toEqual([
      ['EQ-012', 'in_use', 'available'],
      ['EQ-013', 'in_use', 'available'],
    ]);
    const bookingEvents = events.rows.filter((e) => e.topic === 'rental.booking').map((e) => e.payload['status']);
    expect(bookingEvents).toEqual(['confirmed', 'completed']);
  });
});

describe.each(backends)('fleet figures under concurrency (%s)', (backend) => {
  const body = (id: string) => ({ machine_ids: [id], location_id: 'LOC-002', start_time: hoursFromNow(6), duration_hours: 12 });
  const machines = Array.from({ length: 15 }, (_, i) => `EQ-${String(i + 1).padStart(3, '0')}`);

  it('15 concurrent one-machine quotes are priced one after another: utilization 1/15 .. 15/15, each once', async () => {
    const server = await startTestServer({ backend });
    const results = await Promise.all(machines.map((id) => rest(server.url, 'POST', '/rental/pricing/quote', body(id))));
    expect(results.map((r) => r.status)).toEqual(Array(15).fill(200));
    const utilizations = results.map((r) => r.body['utilization'] as number).sort((a, b) => a - b);
    expect(utilizations).toEqual(machines.map((_, k) => Math.round(((k + 1) / 15) * 10_000) / 10_000));

    // Fleet events in cursor order count up with the commits, and the last one is the fleet as it is.
    const events = await server.db.query<{ payload: { reserved: number } }>(
      `SELECT payload FROM outbox WHERE topic = 'rental.fleet_summary' ORDER BY outbox.id`,
    );
    expect(events.rows.map((e) => e.payload.reserved)).toEqual(machines.map((_, k) => k + 1));
    const summary = await rest(server.url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ reserved: 15, available: 0 });
  });

  it('the ledger walks newest first by number, each booking once, past ten bookings', async () => {
    const server = await startTestServer({ backend });
    const ids: string[] = [];
    for (const id of machines.slice(0, 12)) {
      const q = await rest(server.url, 'POST', '/rental/pricing/quote', body(id));
      const b = await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: `Walker ${id}` });
      ids.push(b.body['booking_id'] as string);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { bookings: { booking_id: string }[]; next_cursor: string | null } } = await rest(
        server.url,
        'GET',
        `/rental/bookings?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...page.body.bookings.map((b) => b.booking_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
  });
});
