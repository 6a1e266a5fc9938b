import { beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../../platform/clock.js';
import { gql, rest } from '../../support/http.js';
import { runForecast } from '../../support/prediction.js';
import { backends, startTestServer, type TestServer } from '../../support/server.js';

const predictionOf = (server: TestServer) => server.subgraphs.get('prediction')!;

/** A clock that stands still until a test moves it, so instants computed by the test are the server's. */
class ManualClock implements Clock {
  constructor(private at: number) {}
  now(): Date {
    return new Date(this.at);
  }
  set(at: number): void {
    this.at = at;
  }
}

const MINUTE = 60_000;
const HOUR = 3_600_000;
const TTL_SECONDS = 120;
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(backends)('a rental starts when its machines can be on site (%s)', (backend) => {
  let url: string;
  let server: TestServer;
  // A whole hour, so the minute rounding of the earliest start is the test's to compute.
  const t0 = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
  const clock = new ManualClock(t0);

  beforeAll(async () => {
    server = await startTestServer({ backend, clock, env: { QUOTE_TTL_SECONDS: String(TTL_SECONDS) } });
    ({ url } = server);
  });

  const quote = (machineIds: string[], startTime: string, durationHours = 4, locationId = 'LOC-003') =>
    rest(url, 'POST', '/rental/pricing/quote', { machine_ids: machineIds, location_id: locationId, start_time: startTime, duration_hours: durationHours });
  const machineStatus = async (id: string) =>
    (await rest(url, 'GET', '/rental/fleet/machines')).body['machines'].find((m: { id: string }) => m.id === id).status as string;

  /**
   * What the quote promises, from its own figures and prediction's own forecast: the trucks leave when
   * the booking is confirmed (at the latest at the quote's expiry) and load for 15 minutes; each run is on
   * site by its travel forecast's q90 from that departure; rounded up to the minute.
   */
  const promised = async (expiresAt: number, distancesKm: number[]) => {
    const depart = expiresAt + 15 * MINUTE;
    const forecasts = await Promise.all(distancesKm.map((d) => runForecast(predictionOf(server), d, depart)));
    return Math.ceil(Math.max(...forecasts.map((f) => Date.parse(f.arrivalQ90))) / MINUTE) * MINUTE;
  };

  it('every quote shows its earliest start, and a start before it is refused with a 400 that states it', async () => {
    clock.set(t0);
    // EQ-004 (Eindhoven) and EQ-002 (Utrecht) to Amsterdam Zuidas: the Eindhoven truck decides.
    const q = await quote(['EQ-004', 'EQ-002'], iso(t0 + 6 * HOUR));
    expect(q.status).toBe(200);
    const distances = q.body['deliveries'].map((d: { distance_km: number }) => d.distance_km);
    expect(q.body['deliveries'].map((d: { depot_id: string }) => d.depot_id)).toEqual(['DEP-EIN', 'DEP-UTR']);
    expect(Date.parse(q.body['expires_at'])).toBe(t0 + TTL_SECONDS * 1000);
    const earliest = await promised(t0 + TTL_SECONDS * 1000, distances);
    expect(q.body['earliest_start']).toBe(iso(earliest));
    // About 128 km of motorway, 15 min loading, 2 min of quote validity: between one and a half and three
    // and a half hours, whatever the hour of day the test runs at.
    expect(earliest - t0).toBeGreaterThan(1.5 * HOUR);
    expect(earliest - t0).toBeLessThan(3.5 * HOUR);

    // The same request a second before the earliest start: refused, stating the instant and its reason.
    const early = await quote(['EQ-011', 'EQ-005'], iso(earliest - 1000));
    expect(early.status).toBe(400);
    expect(early.body).toMatchObject({ status: 400, code: 'BAD_USER_INPUT' });
    expect(early.body['detail']).toContain(`must be at or after ${iso(earliest)}`);
    expect(early.body['detail']).toContain('DEP-EIN');
    expect(early.body['detail']).toContain("at the travel model's q90");
    expect(early.body['errors']).toEqual([{ field: 'start_time', message: expect.stringContaining(`must be at or after ${iso(earliest)}`) }]);
    // Nothing was reserved by the refused request.
    expect(await machineStatus('EQ-011')).toBe('available');
    expect(await machineStatus('EQ-005')).toBe('available');

    // Exactly at the earliest start: accepted.
    const atEarliest = await quote(['EQ-011', 'EQ-005'], iso(earliest));
    expect(atEarliest.status).toBe(200);
    expect(atEarliest.body['start_time']).toBe(iso(earliest));
    expect(atEarliest.body['earliest_start']).toBe(iso(earliest));

    // A start in the past is refused by the same rule; a machine on the site's doorstep is there within the hour.
    const past = await quote(['EQ-015'], iso(t0 - HOUR), 2, 'LOC-006');
    expect(past.status).toBe(400);
    const near = await promised(t0 + TTL_SECONDS * 1000, [(await quote(['EQ-015'], iso(t0 + 2 * HOUR), 2, 'LOC-006')).body['deliveries'][0].distance_km]);
    expect(near - t0).toBeLessThan(HOUR);
  });

  it('GraphQL shows earliestStart and refuses an earlier start as BAD_USER_INPUT on startTime', async () => {
    clock.set(t0 + 10 * MINUTE);
    const QUOTE = `mutation ($input: CreateQuoteInput!) { createQuote(input: $input) { startTime earliestStart expiresAt deliveries { distanceKm } } }`;
    const ok = await gql(url, QUOTE, { input: { machineIds: ['EQ-013'], locationId: 'LOC-005', startTime: iso(t0 + 12 * HOUR), durationHours: 3 } });
    expect(ok.errors).toBeUndefined();
    const created = ok.data!['createQuote'];
    const earliest = await promised(
      Date.parse(created.expiresAt),
      created.deliveries.map((d: { distanceKm: number }) => d.distanceKm),
    );
    expect(created.earliestStart).toBe(iso(earliest));

    const refused = await gql(url, QUOTE, { input: { machineIds: ['EQ-007'], locationId: 'LOC-005', startTime: iso(earliest - MINUTE), durationHours: 3 } });
    expect(refused.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect(refused.errors?.[0]?.message).toContain(`cannot start before ${iso(earliest)}`);
    expect(refused.errors?.[0]?.extensions?.['fields']).toEqual([{ field: 'startTime', message: expect.stringContaining(iso(earliest)) }]);
  });

  it('confirmed at the last moment the quote allows, every machine is still on site by the start', async () => {
    clock.set(t0 + 20 * MINUTE);
    const probe = await quote(['EQ-008', 'EQ-009'], iso(t0 + 10 * HOUR), 4, 'LOC-002');
    expect(probe.status).toBe(200);
    const start = Date.parse(probe.body['earliest_start']);
    // The probe's machines are reserved; a second quote for others at exactly that start.
    const q = await quote(['EQ-001', 'EQ-014'], iso(start), 4, 'LOC-002');
    expect(q.status).toBe(200);
    expect(q.body['earliest_start']).toBe(iso(start));

    clock.set(Date.parse(q.body['expires_at']) - 1000);
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Laatste Minuut BV' });
    expect(b.status).toBe(200);
    const track = async () => (await rest(url, 'GET', `/rental/booking/${b.body['booking_id']}/track`)).body;
    const planned = await track();
    expect(Date.parse(planned.eta)).toBeLessThanOrEqual(start);
    for (const leg of planned.legs) expect(Date.parse(leg.eta)).toBeLessThanOrEqual(start);

    clock.set(start);
    expect((await track()).status).toBe('on_site');
  });

  it('bills from the start: hours beyond the quote at 125% of its effective hourly rate, none when returned early', async () => {
    clock.set(t0 + 30 * MINUTE);
    const start = t0 + 8 * HOUR;
    const q = await quote(['EQ-012'], iso(start), 4, 'LOC-001');
    expect(q.status).toBe(200);
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Overuren BV' });
    expect(b.status).toBe(200);
    expect(b.body['bill']).toMatchObject({ closed: false, quoted_hours: 4, actual_hours: null, overtime_amount: null });

    // Returned 5 h 10 min after the start: 5.25 billable hours (quarter hours, rounded up), 1.25 h overtime.
    clock.set(start + 5 * HOUR + 10 * MINUTE);
    const done = await rest(url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`);
    expect(done.status).toBe(200);
    const subtotalCents = Math.round(q.body['subtotal'] * 100);
    const overtimeCents = Math.round((subtotalCents / 4) * 1.25 * 1.25);
    expect(overtimeCents).toBeGreaterThan(0);
    expect(done.body['bill']).toEqual({
      currency: 'EUR',
      quoted_hours: 4,
      actual_hours: 5.25,
      billable_hours: 5.25,
      quoted_amount: q.body['total'],
      overtime_amount: overtimeCents / 100,
      final_amount: (Math.round(q.body['total'] * 100) + overtimeCents) / 100,
      closed: true,
      closed_at: iso(start + 5 * HOUR + 10 * MINUTE),
    });

    // Another rental returned after 1 h 20 min of its 4: the quote is the least it costs.
    clock.set(t0 + 40 * MINUTE);
    const q2 = await quote(['EQ-010'], iso(start), 4, 'LOC-004');
    const b2 = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q2.body['quote_id'], customer_name: 'Vroeg Klaar BV' });
    clock.set(start + 80 * MINUTE);
    const early = await rest(url, 'POST', `/rental/booking/${b2.body['booking_id']}/complete`);
    expect(early.body['bill']).toMatchObject({ actual_hours: 1.5, billable_hours: 4, overtime_amount: 0, final_amount: q2.body['total'] });
  });
});
