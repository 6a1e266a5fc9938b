import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import { startTestServer, setups } from '../../support/server.js';
import { hoursFromNow, rest } from '../../support/http.js';

describe.each(setups)('rental REST compatibility paths ($name)', ({ backend, mode }) => {
  let url: string;
  const clock = new OffsetClock();

  beforeAll(async () => {
    ({ url } = await startTestServer({ backend, mode, clock, env: { QUOTE_TTL_SECONDS: '120' } }));
  });

  const quote = (machineIds: string[], extra: Record<string, unknown> = {}) =>
    rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: machineIds,
      location_id: 'LOC-001',
      start_time: hoursFromNow(4, clock.now().getTime()),
      duration_hours: 8,
      ...extra,
    });

  it('GET /rental/health reports liveness and the fleet summary', async () => {
    const res = await rest(url, 'GET', '/rental/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'rental', fleet: { total: 15 } });
  });

  it('GET /rental/fleet/machines lists the 15 demo machines EQ-001..EQ-015 with status', async () => {
    const res = await rest(url, 'GET', '/rental/fleet/machines');
    expect(res.status).toBe(200);
    const ids = res.body['machines'].map((m: { id: string }) => m.id);
    expect(ids).toEqual(Array.from({ length: 15 }, (_, i) => `EQ-${String(i + 1).padStart(3, '0')}`));
    const first = res.body['machines'][0];
    expect(first).toMatchObject({ status: 'available', category: 'excavator', hourly_rate: 95 });
    expect(first.depot.coordinates.lat).toBeCloseTo(51.8932, 4);
  });

  it('GET /rental/fleet/locations lists delivery sites with coordinates', async () => {
    const res = await rest(url, 'GET', '/rental/fleet/locations');
    expect(res.status).toBe(200);
    expect(res.body['locations']).toHaveLength(6);
    expect(res.body['locations'][0]).toMatchObject({ id: 'LOC-001', coordinates: { lat: 51.9066, lon: 4.4886 } });
  });

  it('quote -> confirm -> track -> complete, with fleet counts following each step', async () => {
    const q = await quote(['EQ-003', 'EQ-012']);
    expect(q.status).toBe(200);
    expect(q.body['quote_id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(q.body['line_items']).toHaveLength(2);
    // 2 of 15 reserved after this quote.
    expect(q.body['utilization']).toBeCloseTo(2 / 15, 4);
    expect(q.body['total']).toBeCloseTo(q.body['subtotal'] + q.body['delivery_total'], 2);

    let summary = await rest(url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ available: 13, reserved: 2, in_use: 0, total: 15 });

    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Van Dijk Bouw' });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ status: 'confirmed', customer_name: 'Van Dijk Bouw', machine_ids: ['EQ-003', 'EQ-012'] });
    summary = await rest(url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ available: 13, reserved: 0, in_use: 2 });

    const t = await rest(url, 'GET', `/rental/booking/${b.body['booking_id']}/track`);
    expect(t.status).toBe(200);
    expect(t.body['status']).toBe('scheduled');
    expect(typeof t.body['eta']).toBe('string');
    expect(t.body['coordinates']).toEqual({ lat: 51.8932, lon: 4.4262 });

    const c = await rest(url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`);
    expect(c.status).toBe(200);
    expect(c.body['status']).toBe('completed');
    expect(c.body['bill']).toMatchObject({ closed: true, quoted_hours: 8, billable_hours: 8, final_amount: q.body['total'] });
    summary = await rest(url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ available: 15, reserved: 0, in_use: 0 });

    const again = await rest(url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`);
    expect(again.status).toBe(409);
  });

  it('400 for an invalid location, and nothing is reserved', async () => {
    const res = await quote(['EQ-004'], { location_id: 'LOC-999' });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body).toMatchObject({ status: 400, code: 'BAD_USER_INPUT', errors: [{ field: 'location_id' }] });
    const m = await rest(url, 'GET', '/rental/fleet/machines');
    expect(m.body['machines'].find((x: { id: string }) => x.id === 'EQ-004').status).toBe('available');
  });

  it('400 for an empty machine list', async () => {
    const res = await quote([]);
    expect(res.status).toBe(400);
    expect(res.body['errors']).toEqual([{ field: 'machine_ids', message: 'must not be empty' }]);
  });

  it('400 naming each missing field', async () => {
    const res = await rest(url, 'POST', '/rental/pricing/quote', { machine_ids: ['EQ-001'] });
    expect(res.status).toBe(400);
    expect(res.body['errors'].map((e: { field: string }) => e.field).sort()).toEqual(['duration_hours', 'location_id', 'start_time']);
    const confirm = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: '9d79644e-1c89-42b2-86b8-08dbe88825c2' });
    expect(confirm.status).toBe(400);
    expect(confirm.body['errors']).toEqual([{ field: 'customer_name', message: 'is required' }]);
  });

  it('400 for malformed JSON, a non-object body, bad values and unknown machines', async () => {
    const malformed = await rest(url, 'POST', '/rental/pricing/quote', '{"machine_ids": [');
    expect(malformed.status).toBe(400);
    expect(malformed.body['code']).toBe('BAD_REQUEST');
    expect((await rest(url, 'POST', '/rental/pricing/quote', '[1,2]')).status).toBe(400);
    expect((await quote(['EQ-001'], { duration_hours: -3 })).status).toBe(400);
    expect((await quote(['EQ-001'], { start_time: 'tomorrow' })).status).toBe(400);
    expect((await quote(['EQ-001'], { start_time: hoursFromNow(-5, clock.now().getTime()) })).status).toBe(400);
    expect((await quote(['EQ-001', 'EQ-001'])).status).toBe(400);
    const unknown = await quote(['EQ-099']);
    expect(unknown.status).toBe(400);
    expect(unknown.body['detail']).toContain('EQ-099');
    expect((await rest(url, 'GET', '/rental/bookings?limit=0')).status).toBe(400);
    expect((await rest(url, 'GET', '/rental/bookings?cursor=nonsense')).status).toBe(400);
  });

  it('409 when a machine is not available, and the quote reserves none of its machines', async () => {
    const first = await quote(['EQ-005']);
    expect(first.status).toBe(200);
    const second = await quote(['EQ-006', 'EQ-005']);
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: 'CONFLICT', status: 409 });
    expect(second.body['detail']).toContain('EQ-005');
    const m = await rest(url, 'GET', '/rental/fleet/machines');
    const status = (id: string) => m.body['machines'].find((x: { id: string }) => x.id === id).status;
    expect(status('EQ-006')).toBe('available');
    expect(status('EQ-005')).toBe('reserved');
  });

  it('404 for an unknown quote or booking', async () => {
    const confirm = await rest(url, 'POST', '/rental/booking/confirm', {
      quote_id: '00000000-0000-4000-8000-000000000000',
      customer_name: 'Nobody',
    });
    expect(confirm.status).toBe(404);
    expect(confirm.body['code']).toBe('NOT_FOUND');
    expect((await rest(url, 'GET', '/rental/booking/BK-000000000000/track')).status).toBe(404);
    expect((await rest(url, 'POST', '/rental/booking/BK-000000000000/complete')).status).toBe(404);
    expect((await rest(url, 'GET', '/rental/no-such-path')).status).toBe(404);
  });

  it('410 for an expired quote, whose machines are released', async () => {
    const q = await quote(['EQ-007']);
    expect(q.status).toBe(200);
    clock.advance(121_000);
    const res = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Late Ltd' });
    expect(res.status).toBe(410);
    expect(res.body['code']).toBe('GONE');
    const m = await rest(url, 'GET', '/rental/fleet/machines');
    expect(m.body['machines'].find((x: { id: string }) => x.id === 'EQ-007').status).toBe('available');
    // The machine can be quoted again at once.
    expect((await quote(['EQ-007'])).status).toBe(200);
  });

  it('the fleet summary read first after a quote expires counts its machines as available again', async () => {
    const before = (await rest(url, 'GET', '/rental/fleet/summary')).body;
    const q = await quote(['EQ-006']);
    expect(q.status).toBe(200);
    const reserved = (await rest(url, 'GET', '/rental/fleet/summary')).body;
    expect(reserved).toMatchObject({ available: before['available'] - 1, reserved: before['reserved'] + 1 });
    // The same summary again, answered as it was (on PGlite from the read cache), while the quote holds.
    expect((await rest(url, 'GET', '/rental/fleet/summary')).body).toEqual(reserved);
    // Past every quote's expiry (this one's and any an earlier test left): each reserved machine is free.
    clock.advance(121_000);
    const after = (await rest(url, 'GET', '/rental/fleet/summary')).body;
    expect(after).toMatchObject({ available: before['total'] - before['in_use'], reserved: 0, in_use: before['in_use'] });
  });

  it('a second confirm never books twice: 409, or the same booking for a repeated Idempotency-Key', async () => {
    const q = await quote(['EQ-008']);
    const body = { quote_id: q.body['quote_id'], customer_name: 'Hijmans Kranen' };
    const headers = { 'idempotency-key': `confirm-${q.body['quote_id']}` };
    const first = await rest(url, 'POST', '/rental/booking/confirm', body, headers);
    const replay = await rest(url, 'POST', '/rental/booking/confirm', body, headers);
    expect(first.status).toBe(200);
    expect(replay.status).toBe(200);
    expect(replay.body['booking_id']).toBe(first.body['booking_id']);
    const plain = await rest(url, 'POST', '/rental/booking/confirm', body);
    expect(plain.status).toBe(409);
    const ledger = await rest(url, 'GET', '/rental/bookings?limit=100');
    expect(ledger.body['bookings'].filter((b: { quote_id: string }) => b.quote_id === q.body['quote_id'])).toHaveLength(1);
  });

  it('GET /rental/bookings pages the ledger newest first', async () => {
    for (const id of ['EQ-013', 'EQ-014', 'EQ-015']) {
      const q = await quote([id]);
      await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: `Customer ${id}` });
    }
    const page1 = await rest(url, 'GET', '/rental/bookings?limit=2');
    expect(page1.status).toBe(200);
    expect(page1.body['bookings'].map((b: { customer_name: string }) => b.customer_name)).toEqual(['Customer EQ-015', 'Customer EQ-014']);
    expect(page1.body['next_cursor']).toBeTypeOf('string');
    const page2 = await rest(url, 'GET', `/rental/bookings?limit=2&cursor=${page1.body['next_cursor']}`);
    expect(page2.body['bookings'][0].customer_name).toBe('Customer EQ-013');
    expect(page1.body['total']).toBeGreaterThanOrEqual(5);
    expect(page1.body['bookings'][0].bill).toMatchObject({ closed: false, currency: 'EUR' });
  });
});
