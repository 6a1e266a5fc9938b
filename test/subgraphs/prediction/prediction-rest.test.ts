import { beforeAll, describe, expect, it } from 'vitest';
import { DWELL_FEATURES, TRAVEL_FEATURES } from '../../../subgraphs/prediction/features.js';
import { rest } from '../../support/http.js';
import { dwellFeatures, lockerFeatures, travelFeatures } from '../../support/prediction.js';
import { startTestServer } from '../../support/server.js';

type Problem = { status: number; code: string; detail: string; errors: { field: string; message: string }[] };
const fieldsOf = (body: Problem) => body.errors.map((e) => e.field);

describe('prediction REST compatibility paths', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });
  const post = <T = Record<string, any>>(path: string, body: unknown) => rest<T>(url, 'POST', `/prediction${path}`, body);

  it('GET /prediction/health reports readiness, versions, training time and held-out metrics', async () => {
    const res = await rest(url, 'GET', '/prediction/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'prediction', ready: true });
    expect(Date.parse(res.body['trained_at'])).not.toBeNaN();
    const { dwell, travel, locker } = res.body['models'];
    for (const m of [dwell, travel]) {
      expect(m).toMatchObject({ ready: true, version: expect.stringMatching(/^[0-9a-f]{12}$/) });
      expect(m.metrics.coverage_80).toBeGreaterThanOrEqual(0.78);
      expect(m.metrics.coverage_80).toBeLessThanOrEqual(0.82);
      expect(m.metrics.pinball_loss).toBeLessThan(m.metrics.baseline_pinball_loss);
    }
    expect(dwell).toMatchObject({ features: 22, metrics: { spec_coverage_80: 0.747 } });
    expect(travel).toMatchObject({ features: 12, metrics: { spec_coverage_80: 0.771 } });
    expect(locker).toMatchObject({ features: 10, metrics: { spec_roc_auc: 0.849 } });
    expect(locker.metrics.roc_auc).toBeGreaterThan(0.849);
    expect(locker.metrics.brier_score).toBeLessThan(locker.metrics.baseline_brier_score);

    // Coverage by decile of the inputs that drive each answer, as metrics.json holds it.
    expect(Object.keys(dwell.metrics.coverage_by_decile)).toEqual(['floor_number', 'queue_length', 'distance_to_opc_km', 'hour_of_day']);
    expect(Object.keys(travel.metrics.coverage_by_decile)).toEqual(['distance_km', 'hour_of_day']);
    const distance = travel.metrics.coverage_by_decile.distance_km;
    expect(distance).toHaveLength(10);
    expect(distance[9]).toMatchObject({ to: expect.any(Number), n: expect.any(Number), coverage_80: expect.any(Number), mean_width_min: expect.any(Number) });
    expect(distance[9].to).toBeGreaterThan(1400);
    for (const m of [dwell, travel]) {
      for (const groups of Object.values<{ n: number; coverage_80: number }[]>(m.metrics.coverage_by_decile)) {
        expect(groups.reduce((sum, g) => sum + g.n, 0)).toBe(m.metrics.test_size);
        for (const g of groups) expect(Math.abs(g.coverage_80 - 0.8)).toBeLessThanOrEqual(0.04);
      }
    }
    expect(dwell.baseline).toContain('per floor');
    expect(Object.keys(locker.metrics.calibration_by_decile)).toEqual(['locker_distance_km', 'handoff_window_min', 'hour_of_day']);
    expect(locker.metrics.calibration_by_decile.locker_distance_km[0]).toMatchObject({
      n: expect.any(Number),
      mean_probability: expect.any(Number),
      observed_rate: expect.any(Number),
    });
  });

  it('POST /prediction/predict/dwell_advanced answers ordered quantiles, the width and a risk sentence naming the margin', async () => {
    const res = await post('/predict/dwell_advanced', dwellFeatures);
    expect(res.status).toBe(200);
    const b = res.body;
    expect(b['q10_min']).toBeGreaterThan(0);
    expect(b['q10_min']).toBeLessThanOrEqual(b['q50_min']);
    expect(b['q50_min']).toBeLessThanOrEqual(b['q90_min']);
    expect(b['interval_width_min']).toBeCloseTo(b['q90_min'] - b['q10_min'], 1);
    expect(b['worst_case_margin_min']).toBeCloseTo(dwellFeatures.ischaemic_remaining_min - b['q90_min'], 1);
    expect(b['interpretation']).toContain(`margin of ${b['worst_case_margin_min'].toFixed(1)} min`);
    expect(['low', 'moderate', 'high', 'breach']).toContain(b['risk_level']);

    const tight = await post('/predict/dwell_advanced', { ...dwellFeatures, ischaemic_remaining_min: 5 });
    expect(tight.body).toMatchObject({ risk_level: 'breach' });
    expect(tight.body['interpretation']).toMatch(/^Breach risk: .* exceeds the 5\.0 min of ischaemic time remaining/);
  });

  it('POST /prediction/predict/travel_time and /locker_advanced answer quantile minutes and a probability', async () => {
    const travel = await post('/predict/travel_time', travelFeatures);
    expect(travel.status).toBe(200);
    expect(travel.body['q10_min']).toBeLessThanOrEqual(travel.body['q50_min']);
    expect(travel.body['q50_min']).toBeLessThanOrEqual(travel.body['q90_min']);
    expect(Object.keys(travel.body).sort()).toEqual(['interval_width_min', 'model_version', 'q10_min', 'q50_min', 'q90_min']);

    const locker = await post('/predict/locker_advanced', lockerFeatures);
    expect(locker.status).toBe(200);
    expect(locker.body['success_probability']).toBeGreaterThanOrEqual(0);
    expect(locker.body['success_probability']).toBeLessThanOrEqual(1);
    const full = await post('/predict/locker_advanced', { ...lockerFeatures, locker_occupancy: 0.98 });
    expect(full.body['success_probability']).toBeLessThan(locker.body['success_probability']);
  });

  it('400 lists every missing feature by name', async () => {
    const res = await post<Problem>('/predict/dwell_advanced', {});
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('BAD_USER_INPUT');
    expect(fieldsOf(res.body).sort()).toEqual(DWELL_FEATURES.map((f) => f.name).sort());
    expect(res.body.errors.every((e) => e.message === 'is required')).toBe(true);

    const { distance_km: _d, peak_hour: _p, ...partial } = travelFeatures;
    const some = await post<Problem>('/predict/travel_time', partial);
    expect(some.status).toBe(400);
    expect(fieldsOf(some.body).sort()).toEqual(['distance_km', 'peak_hour']);
    expect(some.body.detail).toBe('distance_km: is required; peak_hour: is required');
    expect(TRAVEL_FEATURES).toHaveLength(12);
  });

  it('400 names a value out of range, of the wrong type, an unknown code, a bad flag and a broken sin/cos pair', async () => {
    const cases: [string, Record<string, unknown>, string, RegExp][] = [
      ['/predict/dwell_advanced', { urban_density: 1.5 }, 'urban_density', /at most 1/],
      ['/predict/dwell_advanced', { floor_number: 2.5 }, 'floor_number', /whole number/],
      ['/predict/dwell_advanced', { queue_length: '3' }, 'queue_length', /must be a number/],
      ['/predict/dwell_advanced', { organ_type: 9 }, 'organ_type', /one of 0 \(kidney\), 1 \(liver\)/],
      ['/predict/dwell_advanced', { elevator_available: 2 }, 'elevator_available', /0 or 1/],
      ['/predict/travel_time', { distance_km: -4 }, 'distance_km', /at least 0.1/],
      ['/predict/travel_time', { weather: null }, 'weather', /must be a number/],
      ['/predict/travel_time', { hour_sin: 1, hour_cos: 1 }, 'hour_sin', /sin and cos of one angle/],
      ['/predict/locker_advanced', { locker_occupancy: -0.1 }, 'locker_occupancy', /at least 0/],
    ];
    const base: Record<string, Record<string, number>> = {
      '/predict/dwell_advanced': dwellFeatures,
      '/predict/travel_time': travelFeatures,
      '/predict/locker_advanced': lockerFeatures,
    };
    for (const [path, change, field, message] of cases) {
      const res = await post<Problem>(path, { ...base[path], ...change });
      expect(res.status, `${path} ${field}`).toBe(400);
      expect(res.body.code).toBe('BAD_USER_INPUT');
      expect(fieldsOf(res.body)).toEqual([field]);
      expect(res.body.errors[0]!.message).toMatch(message);
    }
  });

  it('400 for a body that is not a JSON object or not JSON at all', async () => {
    expect((await post('/predict/travel_time', [travelFeatures])).status).toBe(400);
    expect((await post('/predict/travel_time', '{"distance_km": ')).status).toBe(400);
  });

  it('batch paths answer each instance in order, the same as one at a time, and name the failing instance', async () => {
    const instances = [travelFeatures, { ...travelFeatures, distance_km: 5, road_type: 0 }, { ...travelFeatures, distance_km: 300 }];
    const batch = await post('/predict/travel_time/batch', { instances });
    expect(batch.status).toBe(200);
    expect(batch.body['predictions']).toHaveLength(3);
    for (const [i, instance] of instances.entries()) {
      expect(batch.body['predictions'][i]).toEqual((await post('/predict/travel_time', instance)).body);
    }
    const dwell = await post('/predict/dwell_advanced/batch', { instances: [dwellFeatures, dwellFeatures] });
    expect(dwell.body['predictions']).toHaveLength(2);
    const locker = await post('/predict/locker_advanced/batch', { instances: [lockerFeatures] });
    expect(locker.body['predictions'][0]).toEqual((await post('/predict/locker_advanced', lockerFeatures)).body);

    const bad = await post<Problem>('/predict/travel_time/batch', { instances: [travelFeatures, { ...travelFeatures, traffic: 7 }] });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.body)).toEqual(['instances[1].traffic']);
    expect((await post<Problem>('/predict/travel_time/batch', { instances: [] })).status).toBe(400);
    const tooMany = await post<Problem>('/predict/locker_advanced/batch', { instances: Array.from({ length: 1001 }, () => lockerFeatures) });
    expect(tooMany.status).toBe(400);
    expect(fieldsOf(tooMany.body)).toEqual(['instances']);
  });

  it('POST /prediction/predict/cold_chain_margin composes travel and dwell quantiles against the ischaemic time', async () => {
    const res = await post('/predict/cold_chain_margin', { dwell: dwellFeatures, travel: travelFeatures, ischaemic_remaining_min: 150 });
    expect(res.status).toBe(200);
    const { dwell, travel, best, median, worst } = res.body;
    expect(best.total_min).toBeCloseTo(dwell.q10_min + travel.q10_min, 1);
    expect(median.total_min).toBeCloseTo(dwell.q50_min + travel.q50_min, 1);
    expect(worst.total_min).toBeCloseTo(dwell.q90_min + travel.q90_min, 1);
    expect(worst.margin_min).toBeCloseTo(150 - worst.total_min, 1);
    expect(res.body['worst_case_breach']).toBe(worst.margin_min < 0);
    expect(best.margin_min).toBeGreaterThanOrEqual(median.margin_min);
    expect(median.margin_min).toBeGreaterThanOrEqual(worst.margin_min);

    const bad = await post<Problem>('/predict/cold_chain_margin', { dwell: { ...dwellFeatures, floor_number: 99 }, travel: {}, ischaemic_remaining_min: -1 });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.body)).toEqual(expect.arrayContaining(['dwell.floor_number', 'travel.distance_km', 'ischaemic_remaining_min']));

    // One organ, one clock: the dwell feature and the margin's remaining time must agree.
    const mismatch = await post<Problem>('/predict/cold_chain_margin', {
      dwell: { ...dwellFeatures, ischaemic_remaining_min: 100 },
      travel: travelFeatures,
      ischaemic_remaining_min: 300,
    });
    expect(mismatch.status).toBe(400);
    expect(fieldsOf(mismatch.body)).toEqual(['ischaemic_remaining_min']);
    expect(mismatch.body.detail).toContain('100');
  });
});

describe('prediction REST auth', () => {
  it('demo mode serves a call without x-api-key, as the specification’s proxy does', async () => {
    const { url } = await startTestServer();
    expect((await rest(url, 'POST', '/prediction/predict/travel_time', travelFeatures)).status).toBe(200);
  });

  it('with API_KEYS set, a call without a valid key is 401 and a call with one is served', async () => {
    const { url } = await startTestServer({ env: { API_KEYS: 'partner-key-0001' } });
    const none = await rest(url, 'POST', '/prediction/predict/travel_time', travelFeatures);
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect((await rest(url, 'GET', '/prediction/health')).status).toBe(401);
    const ok = await rest(url, 'POST', '/prediction/predict/travel_time', travelFeatures, { 'x-api-key': 'partner-key-0001' });
    expect(ok.status).toBe(200);
  });
});
