import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../platform/clock.js';
import { hoursFromNow, rest } from './support/http.js';
import { startTestServer } from './support/server.js';
import { until } from './support/wait.js';

describe('delivery tracking follows the stored plan and time', () => {
  let url: string;
  const clock = new OffsetClock();
  beforeAll(async () => {
    ({ url } = await startTestServer({ clock }));
  });

  it('scheduled -> dispatched -> in_transit (moving) -> on_site -> completed', async () => {
    // EQ-002 from Utrecht to the Maasvlakte: about 84 km of road, 112 minutes at 45 km/h.
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-002'],
      location_id: 'LOC-002',
      start_time: hoursFromNow(5, clock.now().getTime()),
      duration_hours: 8,
    });
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Havenbedrijf' });
    const id = b.body['booking_id'];
    const track = async () => (await rest(url, 'GET', `/rental/booking/${id}/track`)).body;

    const t0 = await track();
    expect(t0.status).toBe('scheduled');
    const leg = t0.legs[0];
    const travelMin = (Date.parse(leg.eta) - Date.parse(leg.depart_at)) / 60_000;
    expect(travelMin).toBeCloseTo((leg.distance_km / 45) * 60, 0);
    // Arrives 30 minutes before the rental starts.
    expect(Date.parse(q.body['start_time']) - Date.parse(leg.eta)).toBeCloseTo(30 * 60_000, -3);

    clock.advance(Date.parse(leg.dispatch_at) - clock.now().getTime() + 1000);
    expect((await track()).status).toBe('dispatched');

    clock.advance(15 * 60_000);
    const moving1 = await track();
    clock.advance(30 * 60_000);
    const moving2 = await track();
    expect(moving1.status).toBe('in_transit');
    expect(moving2.status).toBe('in_transit');
    expect(moving2.coordinates).not.toEqual(moving1.coordinates);
    expect(moving2.distance_remaining_km).toBeLessThan(moving1.distance_remaining_km);
    expect(moving2.minutes_remaining).toBeCloseTo(moving1.minutes_remaining - 30, 0);
    expect(moving2.eta).toBe(moving1.eta);

    clock.advance(travelMin * 60_000);
    const arrived = await track();
    expect(arrived).toMatchObject({ status: 'on_site', coordinates: { lat: 51.9625, lon: 4.0135 }, minutes_remaining: 0 });

    await rest(url, 'POST', `/rental/booking/${id}/complete`);
    expect((await track()).status).toBe('completed');
  });

  it('the sweeper releases machines of expired quotes without any request touching them', async () => {
    const sweepClock = new OffsetClock();
    const fast = await startTestServer({ env: { QUOTE_TTL_SECONDS: '60', QUOTE_SWEEP_INTERVAL_MS: '100' }, clock: sweepClock });
    const q = await rest(fast.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-003'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(2),
      duration_hours: 1,
    });
    expect(q.status).toBe(200);
    const reserved = async () =>
      (await fast.db.query<{ status: string }>(`SELECT status FROM rental_machines WHERE id = 'EQ-003'`)).rows[0]!.status;
    expect(await reserved()).toBe('reserved');
    // Past the 60 s expiry on the server's clock; the sweeper (every 100 ms) notices without a request.
    sweepClock.advance(61_000);
    await until(async () => (await reserved()) === 'available', 'the sweeper to release EQ-003');
    const events = await fast.db.query<{ payload: { machineId: string; reason: string } }>(
      `SELECT payload FROM outbox WHERE topic = 'rental.machine_status' ORDER BY id`,
    );
    expect(events.rows.map((r) => [r.payload.machineId, r.payload.reason])).toEqual([
      ['EQ-003', 'quote'],
      ['EQ-003', 'expiry'],
    ]);
  });
});
