import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { runForecast } from '../../support/prediction.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';
import { until } from '../../support/wait.js';

describe('delivery tracking follows the stored plan and time', () => {
  let url: string;
  let server: TestServer;
  const clock = new OffsetClock();
  beforeAll(async () => {
    server = await startTestServer({ clock });
    ({ url } = server);
  });

  it("scheduled -> dispatched -> in_transit (moving) -> on_site -> completed, on the travel model's forecast", async () => {
    // EQ-002 from Utrecht to the Maasvlakte: about 84 km of road.
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
    // The run's road time is prediction's own forecast for its distance and departure, band included.
    const f = await runForecast(server.subgraphs.get('prediction')!, leg.distance_km, leg.depart_at);
    expect(leg).toMatchObject({ eta_source: 'model', eta_model_version: f.modelVersion, eta: f.arrivalQ50, eta_q10: f.arrivalQ10, eta_q90: f.arrivalQ90 });
    expect(t0).toMatchObject({ eta: f.arrivalQ50, eta_q10: f.arrivalQ10, eta_q90: f.arrivalQ90, eta_source: 'model', eta_model_version: f.modelVersion });
    expect(f.q10Minutes).toBeLessThan(f.q90Minutes);
    const travelMin = (Date.parse(leg.eta) - Date.parse(leg.depart_at)) / 60_000;
    expect(travelMin).toBeCloseTo(f.q50Minutes, 3);
    // Planned to be on site 30 minutes before the rental starts at the forecast's q90: to the minute, or,
    // where a rush hour begins just after the departure (no departure lands on the target), the latest
    // departure on time: leaving a minute later would be late.
    const target = Date.parse(q.body['start_time']) - 30 * 60_000;
    expect(Date.parse(leg.eta_q90)).toBeLessThanOrEqual(target);
    if (target - Date.parse(leg.eta_q90) >= 60_000) {
      const later = new Date(Date.parse(leg.depart_at) + 60_000).toISOString();
      const g = await runForecast(server.subgraphs.get('prediction')!, leg.distance_km, later);
      expect(Date.parse(g.arrivalQ90)).toBeGreaterThan(target);
    }

    clock.advance(Date.parse(leg.dispatch_at) - clock.now().getTime() + 1000);
    expect((await track()).status).toBe('dispatched');

    clock.advance(15 * 60_000);
    const moving1 = await track();
    clock.advance(20 * 60_000);
    const moving2 = await track();
    expect(moving1.status).toBe('in_transit');
    expect(moving2.status).toBe('in_transit');
    expect(moving2.coordinates).not.toEqual(moving1.coordinates);
    expect(moving2.distance_remaining_km).toBeLessThan(moving1.distance_remaining_km);
    expect(moving2.minutes_remaining).toBeCloseTo(moving1.minutes_remaining - 20, 0);
    // The truck keeps its median pace: the ETA stands, and the band narrows with the road left.
    expect(moving2.eta).toBe(moving1.eta);
    const width = (t: Record<string, string>) => Date.parse(t['eta_q90']!) - Date.parse(t['eta_q10']!);
    expect(width(moving1)).toBeLessThan(width(t0));
    expect(width(moving2)).toBeLessThan(width(moving1));
    const share = moving2.distance_remaining_km / leg.distance_km;
    expect(width(moving2) / 60_000).toBeCloseTo((f.q90Minutes - f.q10Minutes) * share, 0);
    for (const m of [moving1, moving2]) {
      expect(Date.parse(m.eta_q10)).toBeLessThanOrEqual(Date.parse(m.eta));
      expect(Date.parse(m.eta)).toBeLessThanOrEqual(Date.parse(m.eta_q90));
    }

    clock.advance(travelMin * 60_000);
    const arrived = await track();
    expect(arrived).toMatchObject({ status: 'on_site', coordinates: { lat: 51.9625, lon: 4.0135 }, minutes_remaining: 0 });
    expect(arrived.eta_q10).toBe(arrived.eta);
    expect(arrived.eta_q90).toBe(arrived.eta);

    await rest(url, 'POST', `/rental/booking/${id}/complete`);
    expect((await track()).status).toBe('completed');
  });

  it('one ETA per truck: REST tracking, GraphQL, the delivery forecast and trackingUpdated give the same numbers', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-004', 'EQ-006'],
      location_id: 'LOC-003',
      start_time: hoursFromNow(6, clock.now().getTime()),
      duration_hours: 4,
    });
    expect(q.status).toBe(200);
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Een ETA BV' });
    const id = b.body['booking_id'] as string;
    const viaRest = (await rest(url, 'GET', `/rental/booking/${id}/track`)).body;
    const viaGraphql = await gql(
      url,
      `query ($id: ID!) { booking(id: $id) {
        tracking { eta etaQ10 etaQ90 etaSource etaModelVersion legs { eta etaQ10 etaQ90 etaSource } }
        deliveryForecast { arrivalQ10 arrivalQ50 arrivalQ90 modelVersion } } }`,
      { id },
    );
    expect(viaGraphql.errors).toBeUndefined();
    const booking = viaGraphql.data!['booking'];
    expect(booking.tracking).toMatchObject({ eta: viaRest.eta, etaQ10: viaRest.eta_q10, etaQ90: viaRest.eta_q90, etaSource: 'MODEL' });
    // The dashboard's forecast band and the tracking ETA are one computation of the last-arriving truck.
    expect(booking.deliveryForecast).toEqual({
      arrivalQ10: booking.tracking.etaQ10,
      arrivalQ50: booking.tracking.eta,
      arrivalQ90: booking.tracking.etaQ90,
      modelVersion: booking.tracking.etaModelVersion,
    });
    expect(booking.tracking.legs.map((l: { eta: string }) => l.eta)).toEqual(viaRest.legs.map((l: { eta: string }) => l.eta));

    const ws = wsClient(url);
    const events = new Collector<{ trackingUpdated: Record<string, string> }>(
      ws.client,
      'subscription ($id: ID!) { trackingUpdated(bookingId: $id, after: "0") { status eta etaQ10 etaQ90 etaSource etaModelVersion } }',
      { id },
    );
    await events.count(1);
    expect(events.data[0]!.trackingUpdated).toEqual({
      status: 'SCHEDULED',
      eta: viaRest.eta,
      etaQ10: viaRest.eta_q10,
      etaQ90: viaRest.eta_q90,
      etaSource: 'MODEL',
      etaModelVersion: viaRest.eta_model_version,
    });
    events.unsubscribe();
    await ws.dispose();
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
    const reserved = async () => (await fast.db.query<{ status: string }>(`SELECT status FROM rental_machines WHERE id = 'EQ-003'`)).rows[0]!.status;
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
