import { describe, expect, it } from 'vitest';
import {
  earliestStart,
  legState,
  planLegs,
  promiseDeparture,
  reforecastLeg,
  reforecastRun,
  trackingState,
  type QuotedRun,
} from '../../../subgraphs/rental/tracking.js';
import { ruleForecast, type TravelForecast, type TravelForecaster } from '../../../subgraphs/rental/travel.js';

const MINUTE = 60_000;
const depot = { latitude: 52.09, longitude: 5.12 };
const site = { latitude: 51.96, longitude: 4.01 };
const places = { depot: () => depot, site };

/**
 * A forecaster whose road time depends on the departure as rush hour makes it: 100 min at q50 from
 * `beginsAt` until `clearAt`, 40 min outside; q10 and q90 at 0.8x and 1.25x. It records every run it is asked about.
 */
function rushHour(clearAt: number, beginsAt = -Infinity): TravelForecaster & { asked: { distanceKm: number; departAt: Date }[] } {
  const asked: { distanceKm: number; departAt: Date }[] = [];
  const forecaster = async (runs: readonly { distanceKm: number; departAt: Date }[]) => {
    asked.push(...runs);
    return runs.map((r): TravelForecast => {
      const t = r.departAt.getTime();
      const q50 = (t >= beginsAt && t < clearAt ? 100 : 40) * (r.distanceKm / 60);
      return { source: 'model', version: 'test-1', q10: q50 * 0.8, q50, q90: q50 * 1.25 };
    });
  };
  return Object.assign(forecaster, { asked });
}

/** One 60 km run from Utrecht, confirmed at `now` on a quote expiring two minutes later, planned for `start`. */
async function planOneRun(forecast: TravelForecaster, now: number, start: Date) {
  const [leg] = await planLegs({
    runs: [{ depotId: 'DEP-UTR', machineIds: ['EQ-002'], distanceKm: 60 }],
    confirmedAt: new Date(now),
    startTime: start,
    expiresAt: new Date(now + 2 * MINUTE),
    forecast,
  });
  return leg;
}

describe('delivery plans on travel forecasts', () => {
  it("a start at the quote's earliest start is met whenever within the quote's life it is confirmed, rush hour or not", async () => {
    const quotedAt = Date.parse('2026-03-02T06:00:00Z');
    const expiresAt = new Date(quotedAt + 60 * MINUTE);
    // Rush hour ends five minutes before the quote expires: confirming early means leaving into it.
    const forecast = rushHour(expiresAt.getTime() - 5 * MINUTE);
    const [promise] = await forecast([{ distanceKm: 60, departAt: promiseDeparture(expiresAt) }]);
    const runs: QuotedRun[] = [{ depotId: 'DEP-UTR', machineIds: ['EQ-002'], distanceKm: 60, travel: promise! }];
    const start = earliestStart(runs, expiresAt);
    // Dispatched at expiry, 15 min loading, q90 = 50 min: 65 min after expiry.
    expect(start.getTime()).toBe(expiresAt.getTime() + 65 * MINUTE);
    let waited = 0;
    for (let confirmedAfter = 0; confirmedAfter < 60; confirmedAfter += 5) {
      const confirmedAt = new Date(quotedAt + confirmedAfter * MINUTE);
      const [leg] = await planLegs({ runs, confirmedAt, startTime: start, expiresAt, forecast });
      expect(Date.parse(leg!.dispatchAt)).toBeGreaterThanOrEqual(confirmedAt.getTime());
      expect(Date.parse(leg!.arriveAt)).toBeLessThanOrEqual(start.getTime());
      const state = trackingState([leg!], places, new Date(start.getTime()), false);
      expect(state.status).toBe('on_site');
      // Leaving now into rush hour would arrive late: the run leaves when the promise has it leave.
      if (leg!.departAt === promiseDeparture(expiresAt).toISOString()) waited += 1;
    }
    // Confirmed 15 to 35 minutes after the quote: leaving into rush hour would arrive up to 25 min late.
    expect(waited).toBe(5);
  });

  it("with room, each run leaves so that its q90 arrival is 30 minutes before the start; the departure is the forecast's fixed point", async () => {
    const now = Date.parse('2026-03-02T05:00:00Z');
    const clearAt = Date.parse('2026-03-02T08:00:00Z');
    const forecast = rushHour(clearAt);
    const start = new Date(Date.parse('2026-03-02T09:30:00Z'));
    const leg = await planOneRun(forecast, now, start);
    // The rule's guess (80 min) leaves at 07:40, in rush hour (q90 125 min): leave at 06:55; still rush.
    expect(leg!.departAt).toBe('2026-03-02T06:55:00.000Z');
    expect(leg!.arriveAt).toBe('2026-03-02T08:35:00.000Z');
    expect(leg!.forecast).toMatchObject({ source: 'model', version: 'test-1', q50: 100, from: leg!.departAt, remainingKm: 60 });
    const state = legState(leg!, depot, site, new Date(now), false);
    expect(state.etaQ90.toISOString()).toBe('2026-03-02T09:00:00.000Z');
    expect(state.etaQ10.toISOString()).toBe('2026-03-02T08:15:00.000Z');
    expect(forecast.asked.length).toBeLessThanOrEqual(4);
  });

  it('where rush hour begins there is no fixed point: the run leaves at the latest minute that is still on time at q90', async () => {
    const now = Date.parse('2026-03-02T05:00:00Z');
    const rushAt = Date.parse('2026-03-02T07:00:00Z');
    const forecast = rushHour(Date.parse('2026-03-02T09:30:00Z'), rushAt);
    // On site by 08:00 at q90: leaving at 07:10 (50 min at q90) leaves into rush hour (125 min), leaving at
    // 05:55 arrives two hours early, and no departure lands on 08:00 exactly. Leaving just before 07:00 is on time.
    const start = new Date(Date.parse('2026-03-02T08:30:00Z'));
    const leg = await planOneRun(forecast, now, start);
    const depart = Date.parse(leg!.departAt);
    expect(depart).toBeLessThan(rushAt);
    expect(rushAt - depart).toBeLessThanOrEqual(MINUTE);
    const state = legState(leg!, depot, site, new Date(now), false);
    expect(state.etaQ90.getTime()).toBeLessThanOrEqual(Date.parse('2026-03-02T08:00:00Z'));
    expect(state.etaQ90.getTime()).toBe(depart + 50 * MINUTE);
    expect(leg!.forecast).toMatchObject({ q50: 40, q90: 50 });
    // Four forecasts of the iteration, then at most eight halvings.
    expect(forecast.asked.length).toBeLessThanOrEqual(12);
  });

  it("a run forecast by the rule is forecast again on the road from where the truck is: no jump in place, the model's ETA", async () => {
    const confirmedAt = new Date('2026-03-02T10:00:00Z');
    const byRule: TravelForecaster = async (runs) => runs.map((r) => ruleForecast(r.distanceKm));
    const [leg] = await planLegs({
      runs: [{ depotId: 'DEP-UTR', machineIds: ['EQ-002'], distanceKm: 90 }],
      confirmedAt,
      startTime: new Date('2026-03-02T12:00:00Z'),
      expiresAt: confirmedAt,
      forecast: byRule,
    });
    expect(leg!.forecast?.source).toBe('rule');
    // Leaves at loading's end (120 min at 45 km/h does not fit before the start), on the road 30 minutes.
    const now = new Date(Date.parse(leg!.departAt) + 30 * MINUTE);
    const before = legState(leg!, depot, site, now, false);
    expect(before).toMatchObject({ status: 'in_transit', distanceRemainingKm: 67.5, etaSource: 'rule' });
    expect(before.etaQ10.getTime()).toBe(before.eta.getTime());

    const run = reforecastRun(leg!, before, now);
    expect(run).toEqual({ distanceKm: 67.5, departAt: now });
    const model: TravelForecast = { source: 'model', version: 'm-2', q10: 50, q50: 60, q90: 80 };
    const replanned = reforecastLeg(leg!, run, model);
    const after = legState(replanned, depot, site, now, false);
    expect(after.coordinates).toEqual(before.coordinates);
    expect(after.distanceRemainingKm).toBe(67.5);
    expect(after).toMatchObject({ etaSource: 'model', etaModelVersion: 'm-2' });
    expect(after.eta.getTime()).toBe(now.getTime() + 60 * MINUTE);
    expect(after.etaQ10.getTime()).toBe(now.getTime() + 50 * MINUTE);
    expect(after.etaQ90.getTime()).toBe(now.getTime() + 80 * MINUTE);
    // Halfway through the rest: half the road left, the band half as wide, the same median arrival.
    const later = legState(replanned, depot, site, new Date(now.getTime() + 30 * MINUTE), false);
    expect(later.distanceRemainingKm).toBeCloseTo(33.75, 2);
    expect(later.eta.getTime()).toBe(after.eta.getTime());
    expect(later.etaQ90.getTime() - later.etaQ10.getTime()).toBe(15 * MINUTE);
    // Before the re-forecast the stored plan still shows where the truck was.
    const earlier = legState(replanned, depot, site, new Date(now.getTime() - 15 * MINUTE), false);
    expect(earlier.distanceRemainingKm).toBeCloseTo(78.75, 2);
  });
});
