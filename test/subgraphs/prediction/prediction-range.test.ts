import { describe, expect, it } from 'vitest';
import { MODEL_FEATURES, SEGMENT_FEATURES, angleOf, toVector, vectorNames, type FeatureSpec, type ModelName } from '../../../subgraphs/prediction/features.js';
import { SATURATING_INPUTS, dwellMinutes, generate, lockerLogit, travelMinutes } from '../../../subgraphs/prediction/generator.js';
import { coverageByDecile, intervalCoverage, type QuantileTriple } from '../../../subgraphs/prediction/metrics.js';
import { loadModels } from '../../../subgraphs/prediction/model.js';
import { Random } from '../../../platform/random.js';
import { sigmoid } from '../../../platform/statistics.js';

/*
 * The checked-in models over everything the API accepts, checked against the generator itself: its
 * feature draws reach the ends of every accepted range, the answers at those ends follow the simulated
 * truth, the 80% interval covers 80% within every decile of the inputs that drive it (on fresh draws the
 * models never saw), and travel time keeps growing with distance up to the largest accepted one.
 */

const models = loadModels();
const QUANTILE_MODELS = ['dwell', 'travel'] as const;
const TARGET = 0.8;
const BAND = 0.04;

const numericInputs = (model: ModelName) => MODEL_FEATURES[model].filter((s) => s.kind === 'number' || s.kind === 'count');
const draw = { dwell: dwellMinutes, travel: travelMinutes };
const trueProbability = (record: Record<string, number>) => sigmoid(lockerLogit(record, angleOf(record['hour_sin']!, record['hour_cos']!, 24)));

describe('the training data reaches the ends of every accepted range', () => {
  it('each numeric input is drawn within 2% of both ends of its range, unless declared saturating', () => {
    for (const model of ['dwell', 'travel', 'locker'] as const) {
      const samples = generate(model, 50_000, 11);
      for (const spec of numericInputs(model)) {
        const values = samples.map((s) => s.features[spec.name]!);
        const span = spec.max - spec.min;
        expect(Math.min(...values) - spec.min, `${model}.${spec.name} low end`).toBeLessThanOrEqual(0.02 * span);
        if (spec.name in SATURATING_INPUTS[model]) continue;
        expect(spec.max - Math.max(...values), `${model}.${spec.name} high end`).toBeLessThanOrEqual(0.02 * span);
      }
    }
    expect(Object.keys(SATURATING_INPUTS.dwell).sort()).toEqual(['courier_experience_years', 'ischaemic_remaining_min']);
  });
});

describe('answers at the ends of every accepted range follow the generator', () => {
  /** Twelve typical records; each test moves one input to the end of its range and keeps the rest. */
  const bases = (model: ModelName) => generate(model, 12, 4242).map((s) => s.features);
  const DRAWS = 1000;
  const quantile = (sorted: number[], p: number) => sorted[Math.floor(p * (sorted.length - 1))]!;

  it.each(QUANTILE_MODELS)(
    '%s: q50 within 12 percent of the simulated median on average, the interval covering 68 to 92 percent of simulated outcomes',
    (model: 'dwell' | 'travel') => {
      for (const spec of numericInputs(model)) {
        for (const value of [spec.min, spec.max]) {
          let lnRatio = 0;
          let covered = 0;
          bases(model).forEach((base, b) => {
            const record = { ...base, [spec.name]: value };
            const r = new Random(b, `truth:${model}:${spec.name}:${value}`);
            const outcomes = Array.from({ length: DRAWS }, () => draw[model](record, r)).sort((x, y) => x - y);
            const q = models[model].predict(record);
            lnRatio += Math.abs(Math.log(q.q50 / quantile(outcomes, 0.5)));
            covered += outcomes.filter((y) => y >= q.q10 && y <= q.q90).length / DRAWS;
          });
          const at = `${model}.${spec.name} = ${value}`;
          expect(lnRatio / 12, `${at}: mean |ln(q50 / true median)|`).toBeLessThanOrEqual(0.12);
          expect(covered / 12, `${at}: coverage`).toBeGreaterThanOrEqual(0.68);
          expect(covered / 12, `${at}: coverage`).toBeLessThanOrEqual(0.92);
        }
      }
    },
  );

  it('locker: the probability within 0.06 of the true one on average at both ends of every range', () => {
    // No simulation needed: the generator's probability is exact, so 200 records instead of 12.
    const records = generate('locker', 200, 4242).map((s) => s.features);
    const typical = records.reduce((sum, r) => sum + Math.abs(models.locker.predict(r) - trueProbability(r)), 0) / records.length;
    expect(typical).toBeLessThan(0.04);
    for (const spec of numericInputs('locker')) {
      for (const value of [spec.min, spec.max]) {
        const errors = records.map((base) => {
          const record = { ...base, [spec.name]: value };
          return Math.abs(models.locker.predict(record) - trueProbability(record));
        });
        expect(errors.reduce((a, e) => a + e, 0) / errors.length, `locker.${spec.name} = ${value}`).toBeLessThanOrEqual(0.06);
      }
    }
  });
});

describe('coverage holds within every decile of the inputs that drive the answer', () => {
  it('metrics.json reports each decile of the held-out split, every one within 0.80 ± 0.04', () => {
    for (const model of QUANTILE_MODELS) {
      const m = models.metrics[model];
      expect(Object.keys(m.coverageByDecile)).toEqual([...SEGMENT_FEATURES[model]]);
      for (const [name, groups] of Object.entries(m.coverageByDecile)) {
        expect(groups.length, `${model}.${name}`).toBeGreaterThanOrEqual(5);
        expect(groups.reduce((sum, g) => sum + g.n, 0)).toBe(m.samples.test);
        groups.forEach((g, i) => {
          expect(g.from).toBeLessThanOrEqual(g.to);
          if (i > 0) expect(g.from).toBeGreaterThanOrEqual(groups[i - 1]!.to);
          expect(Math.abs(g.coverage80 - TARGET), `${model}.${name} ${g.from}..${g.to}: ${g.coverage80}`).toBeLessThanOrEqual(BAND);
        });
      }
    }
    const locker = models.metrics.locker;
    expect(Object.keys(locker.calibrationByDecile)).toEqual([...SEGMENT_FEATURES.locker]);
    for (const [name, groups] of Object.entries(locker.calibrationByDecile)) {
      for (const g of groups) expect(Math.abs(g.meanProbability - g.observedRate), `locker.${name} ${g.from}..${g.to}`).toBeLessThanOrEqual(0.035);
    }
  });

  /** Fresh draws from a seed training never used, predicted by the served models. */
  const fresh = (model: 'dwell' | 'travel') => {
    const samples = generate(model, 40_000, 20_261_123);
    const vectors = samples.map((s) => toVector(model, s.features));
    const predictions: QuantileTriple[] = vectors.map((x) => models[model].predictVector(x));
    const outcome = samples.map((s) => s.target);
    const column = (name: string) => {
      const j = vectorNames(model).indexOf(name);
      return vectors.map((x) => x[j]!);
    };
    return { predictions, outcome, column };
  };

  it.each(QUANTILE_MODELS)('%s on 40,000 fresh draws: every decile of every main input, and the far tails, within 0.80 ± 0.04', (model) => {
    const { predictions, outcome, column } = fresh(model);
    for (const name of SEGMENT_FEATURES[model]) {
      for (const g of coverageByDecile(column(name), predictions, outcome)) {
        expect(Math.abs(g.coverage80 - TARGET), `${model}.${name} ${g.from}..${g.to} (n ${g.n}): ${g.coverage80}`).toBeLessThanOrEqual(BAND);
      }
    }
    // The top deciles are wide (14-60 floors, 260-1,500 km): their far ends on their own.
    const tails: Record<typeof model, [string, number, number][]> = {
      travel: [
        ['distance_km', 400, 900],
        ['distance_km', 900, 1500],
      ],
      dwell: [
        ['floor_number', 30, 60],
        ['queue_length', 15, 50],
        ['distance_to_opc_km', 400, 1000],
      ],
    };
    for (const [name, lo, hi] of tails[model]) {
      const values = column(name);
      const rows = values.flatMap((v, i) => (v >= lo && v <= hi ? [i] : []));
      expect(rows.length, `${model}.${name} ${lo}..${hi} rows`).toBeGreaterThan(500);
      const coverage = intervalCoverage(
        rows.map((i) => predictions[i]!),
        rows.map((i) => outcome[i]!),
      );
      expect(Math.abs(coverage - TARGET), `${model}.${name} ${lo}..${hi} (n ${rows.length}): ${coverage}`).toBeLessThanOrEqual(BAND);
    }
  });
});

describe('answers keep following the inputs to the largest accepted value', () => {
  const spec = (model: ModelName, name: string): FeatureSpec => MODEL_FEATURES[model].find((s) => s.name === name)!;

  it('travel q50 rises with every step of distance from 5 km to 1,500 km, on every road type, in proportion', () => {
    const max = spec('travel', 'distance_km').max;
    expect(max).toBe(1500);
    const grid = [5, 7.5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 250, 300, 400, 500, 600, 700, 750, 800, 900, 1000, 1100, 1200, 1300, 1400, 1500];
    for (const base of generate('travel', 25, 31).map((s) => s.features)) {
      for (const road of [0, 1, 2, 3]) {
        const q50 = grid.map((km) => models.travel.predict({ ...base, road_type: road, distance_km: km }).q50);
        for (let i = 1; i < grid.length; i++) expect(q50[i], `road ${road}: ${grid[i - 1]} -> ${grid[i]} km`).toBeGreaterThan(q50[i - 1]!);
        // Twice the corridor, about twice the time: no plateau at the last distances of the data.
        const doubling = q50[grid.indexOf(1500)]! / q50[grid.indexOf(750)]!;
        expect(doubling, `road ${road}: q50(1500 km) / q50(750 km)`).toBeGreaterThan(1.8);
        expect(doubling, `road ${road}: q50(1500 km) / q50(750 km)`).toBeLessThan(2.3);
      }
    }
  });

  it('below 5 km, where the first and last mile dominate, q50 never falls more than 3% below a shorter distance', () => {
    const grid = [0.1, 0.25, 0.5, 1, 2, 3, 4, 5];
    for (const base of generate('travel', 25, 31).map((s) => s.features)) {
      for (const road of [0, 1, 2, 3]) {
        const q50 = grid.map((km) => models.travel.predict({ ...base, road_type: road, distance_km: km }).q50);
        for (let i = 1; i < grid.length; i++) expect(q50[i]!, `road ${road}: ${grid[i]} km`).toBeGreaterThanOrEqual(0.97 * Math.max(...q50.slice(0, i)));
        expect(q50.at(-1)!, `road ${road}: 5 km against 0.1 km`).toBeGreaterThan(q50[0]!);
      }
    }
  });

  it('dwell q50 rises with the floor (by lift and by the stairs) and with the queue, up to floor 60 and queue 50', () => {
    expect(spec('dwell', 'floor_number').max).toBe(60);
    expect(spec('dwell', 'queue_length').max).toBe(50);
    for (const base of generate('dwell', 100, 31).map((s) => s.features)) {
      for (const lift of [0, 1]) {
        const floors = [0, 30, 60].map((floor) => models.dwell.predict({ ...base, elevator_available: lift, floor_number: floor }).q50);
        for (let i = 1; i < floors.length; i++) expect(floors[i], `lift ${lift}: floor ${i * 30}`).toBeGreaterThan(floors[i - 1]!);
      }
      const queues = [0, 10, 25, 50].map((queue) => models.dwell.predict({ ...base, queue_length: queue }).q50);
      for (let i = 1; i < queues.length; i++) expect(queues[i]).toBeGreaterThan(queues[i - 1]!);
    }
  });
});
