import { beforeAll, describe, expect, it } from 'vitest';
import { BASELINES } from '../../../subgraphs/prediction/baseline.js';
import { SEGMENT_FEATURES, toVector } from '../../../subgraphs/prediction/features.js';
import { generate } from '../../../subgraphs/prediction/generator.js';
import { QuantileModel, LockerModel } from '../../../subgraphs/prediction/model.js';
import { trainAll, type TrainResult } from '../../../subgraphs/prediction/train.js';

/*
 * Retrains every model from scratch on a small seed and checks the held-out figures. With 3000
 * calibration and 3000 test rows the coverage of an exactly calibrated 80% interval has a standard
 * deviation near 0.01, so 0.80 ± 0.04 is about four of them.
 */
const SEED = 1;
const SAMPLES = 15_000;

describe('training on a small seed', () => {
  let result: TrainResult;
  beforeAll(() => {
    result = trainAll({ seed: SEED, samples: SAMPLES });
  }, 180_000);

  it('splits 60 / 20 / 20 with the validation set inside the training share', () => {
    const s = result.metrics.dwell.samples;
    expect(s.train + s.validation).toBe(SAMPLES * 0.6);
    expect(s.calibration).toBe(SAMPLES * 0.2);
    expect(s.test).toBe(SAMPLES * 0.2);
  });

  it('conformalized 80% intervals cover about 80% of the held-out split, and each bound misses about 10% of calibration rows', () => {
    for (const name of ['dwell', 'travel'] as const) {
      const m = result.metrics[name];
      expect(m.coverage80, name).toBeGreaterThanOrEqual(0.76);
      expect(m.coverage80, name).toBeLessThanOrEqual(0.84);
      const model = new QuantileModel(result.artifacts[name]);
      const shift = result.artifacts[name].conformal;
      const calibration = generate(name, SAMPLES, SEED).slice(SAMPLES * 0.6, SAMPLES * 0.8);
      let below = 0;
      let above = 0;
      for (const s of calibration) {
        // The calibrated bounds themselves (ln minutes): the served minutes are rounded to 0.1 min, which
        // can move a bound past an outcome a few hundredths of a minute away.
        const [lo, mid, hi] = model.rawQuantiles(toVector(name, s.features));
        const y = Math.log(s.target);
        if (y < Math.min(lo - shift.lower, mid)) below++;
        if (y > Math.max(hi + shift.upper, mid)) above++;
      }
      // By construction at most α/2 = 10% per side in-sample, and no more than a few rows fewer.
      expect(below / calibration.length).toBeLessThanOrEqual(0.1);
      expect(above / calibration.length).toBeLessThanOrEqual(0.1);
      expect(below / calibration.length).toBeGreaterThan(0.095);
      expect(above / calibration.length).toBeGreaterThan(0.095);
    }
  });

  it('trains on the ratio to the physical baseline and reports coverage within the deciles of the main inputs', () => {
    for (const name of ['dwell', 'travel'] as const) {
      expect(result.artifacts[name]).toMatchObject({ target: 'ln_minutes_over_baseline', baseline: BASELINES[name].name });
      const m = result.metrics[name];
      expect(Object.keys(m.coverageByDecile)).toEqual([...SEGMENT_FEATURES[name]]);
      for (const [feature, groups] of Object.entries(m.coverageByDecile)) {
        expect(
          groups.reduce((sum, g) => sum + g.n, 0),
          `${name}.${feature}`,
        ).toBe(m.samples.test);
        // About 300 rows a decile here: a standard deviation near 0.023, so four of them either side.
        for (const g of groups) expect(Math.abs(g.coverage80 - 0.8), `${name}.${feature} ${g.from}..${g.to}`).toBeLessThanOrEqual(0.1);
      }
    }
    expect(Object.keys(result.metrics.locker.calibrationByDecile)).toEqual([...SEGMENT_FEATURES.locker]);
  });

  it('beats the training-set-quantile baseline on pinball loss at every level, and never crosses', () => {
    for (const name of ['dwell', 'travel'] as const) {
      const m = result.metrics[name];
      for (const level of ['q10', 'q50', 'q90'] as const) expect(m.pinball[level], `${name} ${level}`).toBeLessThan(m.baselinePinball[level]);
      const model = new QuantileModel(result.artifacts[name]);
      for (const s of generate(name, 1000, SEED + 1)) {
        const q = model.predict(s.features);
        expect(q.q10).toBeLessThanOrEqual(q.q50);
        expect(q.q50).toBeLessThanOrEqual(q.q90);
      }
    }
  });

  it('the locker classifier ranks and is calibrated', () => {
    const m = result.metrics.locker;
    expect(m.rocAuc).toBeGreaterThan(0.84);
    expect(m.rocAuc).toBeLessThanOrEqual(m.oracleRocAuc + 0.01);
    expect(m.brier).toBeLessThan(m.baselineBrier);
    expect(m.ece).toBeLessThan(0.04);
    const model = new LockerModel(result.artifacts.locker);
    expect(model.predict(generate('locker', 1, 5)[0]!.features)).toBeGreaterThanOrEqual(0);
  });

  it('is deterministic: the same seed gives the same data and the same artifacts', () => {
    expect(generate('travel', 50, SEED)).toEqual(generate('travel', 50, SEED));
    const small = { seed: SEED, samples: 3000, quantileParams: { maxTrees: 60 }, classifierParams: { maxTrees: 60 } };
    const once = trainAll(small);
    const again = trainAll(small);
    expect(again.artifacts).toEqual(once.artifacts);
    expect(generate('travel', 50, SEED + 1)).not.toEqual(generate('travel', 50, SEED));
  });
});
