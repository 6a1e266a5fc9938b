import { readFileSync } from 'node:fs';
import { buildSchema, isEnumType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { applyIsotonic, fitIsotonic } from '../../../subgraphs/prediction/calibration.js';
import { conformalQuantile } from '../../../subgraphs/prediction/conformal.js';
import { MODEL_FEATURES, angleOf, encodeCyclic, restFeatureSchema, type ModelName } from '../../../subgraphs/prediction/features.js';
import { composeColdChain, deliveryTravelFeatures, readDwell } from '../../../subgraphs/prediction/forecasts.js';
import { generate } from '../../../subgraphs/prediction/generator.js';
import { expectedCalibrationError } from '../../../subgraphs/prediction/metrics.js';
import { loadModels } from '../../../subgraphs/prediction/model.js';
import { Random } from '../../../platform/random.js';
import { rocAuc } from '../../../platform/statistics.js';

const models = loadModels();

/** A record drawn uniformly over every feature's valid range (codes and flags included). */
function uniformRecord(model: ModelName, r: Random): Record<string, number> {
  const record: Record<string, number> = {};
  for (const spec of MODEL_FEATURES[model]) {
    if (spec.kind === 'cyclic') continue;
    record[spec.name] = spec.kind === 'number' ? r.uniform(spec.min, spec.max) : spec.min + r.int(spec.max - spec.min + 1);
  }
  for (const [prefix, period] of [
    ['hour', 24],
    ['day', 7],
    ['month', 12],
  ] as const) {
    const [s, c] = encodeCyclic(r.uniform(0, period), period);
    record[`${prefix}_sin`] = s;
    record[`${prefix}_cos`] = c;
  }
  return record;
}

describe('feature specifications', () => {
  it('dwell takes 22 features, travel 12, locker 10, starting with the ones the specification names', () => {
    expect(MODEL_FEATURES.dwell).toHaveLength(22);
    expect(MODEL_FEATURES.travel).toHaveLength(12);
    expect(MODEL_FEATURES.locker).toHaveLength(10);
    expect(MODEL_FEATURES.dwell.slice(0, 15).map((f) => f.name)).toEqual([
      'building_type',
      'organ_type',
      'security_level',
      'staff_shift',
      'handover_protocol',
      'preservation_method',
      'elevator_available',
      'floor_number',
      'distance_to_opc_km',
      'urban_density',
      'traffic_congestion',
      'weather_severity',
      'ischaemic_remaining_min',
      'hour_sin',
      'hour_cos',
    ]);
    expect(MODEL_FEATURES.travel.slice(0, 8).map((f) => f.name)).toEqual([
      'origin_density',
      'destination_density',
      'distance_km',
      'road_type',
      'weather',
      'traffic',
      'public_holiday',
      'peak_hour',
    ]);
  });

  it('every GraphQL enum in schema/prediction.graphql lists the codes of features.ts, in code order', () => {
    const sdl = readFileSync(new URL('../../../schema/prediction.graphql', import.meta.url), 'utf8');
    const schema = buildSchema(`directive @link(url: String, import: [String]) repeatable on SCHEMA
      directive @key(fields: String!) repeatable on OBJECT
      directive @external on FIELD_DEFINITION
      directive @requires(fields: String!) on FIELD_DEFINITION
      directive @requiresScopes(scopes: [[String!]!]!) on FIELD_DEFINITION
      directive @cost(weight: Int!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
      directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
      ${sdl.replace(/extend schema[\s\S]*?\n\n/, '')}`);
    const coded = Object.values(MODEL_FEATURES)
      .flat()
      .filter((f) => f.kind === 'code');
    expect(coded.length).toBeGreaterThan(0);
    for (const spec of coded) {
      const type = schema.getType(spec.enumType!);
      expect(isEnumType(type), spec.enumType).toBe(true);
      if (!isEnumType(type)) continue;
      expect(type.getValues().map((v) => v.name)).toEqual(spec.codes!.map((c) => c.name));
      spec.codes!.forEach((c, i) => expect(c.code).toBe(i));
      expect(type.getValues().map((v) => v.description)).toEqual(spec.codes!.map((c) => expect.stringContaining(`[${c.code}]`)));
    }
  });

  it('the generator only produces values the API accepts', () => {
    for (const model of ['dwell', 'travel', 'locker'] as const) {
      const schema = restFeatureSchema(model);
      for (const sample of generate(model, 500, 99)) expect(schema.safeParse(sample.features).success).toBe(true);
    }
  });

  it('decodes the angle of a sin/cos pair', () => {
    const [s, c] = encodeCyclic(17.5, 24);
    expect(angleOf(s, c, 24)).toBeCloseTo(17.5, 9);
    expect(angleOf(0, 1, 7)).toBe(0);
  });
});

describe('the checked-in models', () => {
  it('never cross: q10 <= q50 <= q90 over generated data and over the whole input space', () => {
    const r = new Random(4242, 'crossing');
    for (const model of ['dwell', 'travel'] as const) {
      const records = [...generate(model, 2000, 4242).map((s) => s.features), ...Array.from({ length: 3000 }, () => uniformRecord(model, r))];
      for (const record of records) {
        const q = models[model].predict(record);
        expect(q.q10).toBeGreaterThan(0);
        expect(q.q10).toBeLessThanOrEqual(q.q50);
        expect(q.q50).toBeLessThanOrEqual(q.q90);
      }
    }
  });

  it('answer locker probabilities in [0, 1] and react to occupancy and distance in the expected direction', () => {
    const r = new Random(7, 'locker');
    for (let i = 0; i < 2000; i++) {
      const p = models.locker.predict(uniformRecord('locker', r));
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThanOrEqual(1);
    }
    const base = { ...generate('locker', 1, 3)[0]!.features, locker_distance_km: 2, locker_occupancy: 0.4, temperature_controlled: 1 };
    expect(models.locker.predict({ ...base, locker_occupancy: 0.97 })).toBeLessThan(models.locker.predict(base));
    expect(models.locker.predict({ ...base, locker_distance_km: 25 })).toBeLessThan(models.locker.predict(base));
  });

  it('travel time grows with distance', () => {
    const base = generate('travel', 1, 5)[0]!.features;
    const at = (km: number) => models.travel.predict({ ...base, distance_km: km, road_type: 2 }).q50;
    expect(at(10)).toBeLessThan(at(50));
    expect(at(50)).toBeLessThan(at(200));
  });

  it('metrics.json holds the held-out figures of these artifacts, and they meet the targets', () => {
    const { metrics } = models;
    expect(metrics.dwell.version).toBe(models.dwell.version);
    expect(metrics.travel.version).toBe(models.travel.version);
    expect(metrics.locker.version).toBe(models.locker.version);
    for (const m of [metrics.dwell, metrics.travel]) {
      expect(m.coverage80).toBeGreaterThanOrEqual(0.78);
      expect(m.coverage80).toBeLessThanOrEqual(0.82);
      expect(m.coverage80).toBeGreaterThan(m.specCoverage80);
      expect(m.pinball.mean).toBeLessThan(m.baselinePinball.mean);
      expect(m.crossingRateBeforeSorting).toBeLessThan(0.05);
    }
    expect(metrics.locker.rocAuc).toBeGreaterThan(metrics.locker.specRocAuc);
    expect(metrics.locker.brier).toBeLessThan(metrics.locker.baselineBrier);
    expect(metrics.locker.ece).toBeLessThan(0.03);
    expect(metrics.locker.baseRate).toBeGreaterThan(0.49);
    expect(metrics.locker.baseRate).toBeLessThan(0.55);
  });

  it('artifacts stay small', () => {
    const dir = new URL('../../../subgraphs/prediction/models/', import.meta.url);
    const total = ['dwell', 'travel', 'locker'].reduce((sum, m) => sum + readFileSync(new URL(`${m}.json`, dir)).length, 0);
    expect(total).toBeLessThan(2 * 1024 * 1024);
  });
});

describe('building blocks', () => {
  it('conformalQuantile takes the ceil((n+1)(1-a))-th smallest score, or +Infinity when n is too small', () => {
    const scores = Array.from({ length: 9 }, (_, i) => i + 1);
    expect(conformalQuantile(scores, 0.9)).toBe(9);
    expect(conformalQuantile(scores, 0.5)).toBe(5);
    expect(conformalQuantile([1, 2, 3], 0.9)).toBe(Number.POSITIVE_INFINITY);
  });

  it('isotonic calibration is monotone and maps scores to observed rates', () => {
    const r = new Random(11);
    const score = Array.from({ length: 4000 }, () => r.normal(0, 2));
    const label = score.map((s) => (r.bernoulli(1 / (1 + Math.exp(-s))) ? 1 : 0));
    const curve = fitIsotonic(score, label);
    for (let i = 1; i < curve.y.length; i++) expect(curve.y[i]!).toBeGreaterThanOrEqual(curve.y[i - 1]!);
    const calibrated = score.map((s) => applyIsotonic(curve, s));
    expect(expectedCalibrationError(calibrated, label)).toBeLessThan(0.03);
  });

  it('rocAuc is the Mann-Whitney share of pairs ordered right, a tied pair counting half', () => {
    expect(rocAuc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])).toBeCloseTo(0.75, 9);
    expect(rocAuc([0.5, 0.5], [0, 1])).toBe(0.5);
    // Positives 0.5, 0.5, 0.9 against negatives 0.1, 0.2, 0.5: each 0.5 beats two negatives and ties one
    // (2.5 pairs each), 0.9 beats all three, so 8 of the 9 pairs. By ranks: the three 0.5s share rank 4,
    // the positives' rank sum is 4 + 4 + 6 = 14, U = 14 - 3 * 4 / 2 = 8.
    expect(rocAuc([0.2, 0.5, 0.5, 0.5, 0.9, 0.1], [0, 1, 0, 1, 1, 0])).toBeCloseTo(8 / 9, 12);
    // Every score tied: no pair is ordered, each counts half.
    expect(rocAuc([0.3, 0.3, 0.3, 0.3], [1, 0, 0, 1])).toBe(0.5);
    // A label above 0 is positive (a count of claims reads as "any"); one class only leaves AUC undefined.
    expect(rocAuc([0.1, 0.9, 0.5], [0, 2, 1])).toBe(1);
    expect(rocAuc([0.1, 0.9], [1, 1])).toBeNaN();
    expect(rocAuc([0.1, 0.9], [0, 0])).toBeNaN();
  });

  it('reads the dwell risk from the q90 margin and names it', () => {
    const q = { q10: 20, q50: 30, q90: 50 };
    expect(readDwell(q, 200)).toMatchObject({ risk: 'LOW', worstCaseMarginMinutes: 150 });
    expect(readDwell(q, 120).risk).toBe('MODERATE');
    expect(readDwell(q, 80)).toMatchObject({ risk: 'HIGH', worstCaseMarginMinutes: 30 });
    const breach = readDwell(q, 40);
    expect(breach).toMatchObject({ risk: 'BREACH', worstCaseMarginMinutes: -10 });
    expect(breach.interpretation).toContain('-10.0 min');
  });

  it('composes cold-chain margins quantile by quantile', () => {
    const c = composeColdChain({ q10: 20, q50: 30, q90: 50 }, { q10: 40, q50: 55, q90: 80 }, 120);
    expect(c).toEqual({
      best: { totalMinutes: 60, marginMinutes: 60 },
      median: { totalMinutes: 85, marginMinutes: 35 },
      worst: { totalMinutes: 130, marginMinutes: -10 },
      worstCaseBreach: true,
    });
  });

  it('derives a delivery leg’s travel features from its local departure time', () => {
    // Tuesday 2026-11-24 08:15 in Amsterdam (UTC+1): weekday morning rush.
    const rush = deliveryTravelFeatures(35, new Date('2026-11-24T07:15:00Z'));
    expect(rush).toMatchObject({ distance_km: 35, road_type: 2, peak_hour: 1, traffic: 2, public_holiday: 0, weather: 0 });
    expect(angleOf(rush['hour_sin']!, rush['hour_cos']!, 24)).toBeCloseTo(8.25, 6);
    expect(angleOf(rush['day_sin']!, rush['day_cos']!, 7)).toBeCloseTo(1, 6);
    // Christmas Day, a Friday: a holiday, no rush hour.
    const christmas = deliveryTravelFeatures(3, new Date('2026-12-25T07:30:00Z'));
    expect(christmas).toMatchObject({ road_type: 0, peak_hour: 0, public_holiday: 1, traffic: 0 });
  });
});
