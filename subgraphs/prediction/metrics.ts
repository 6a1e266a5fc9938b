import { z } from 'zod';
import { pinball } from './gbm.js';

/** Held-out evaluation of the models: interval coverage and width, pinball loss, ROC-AUC, Brier, calibration. */

export interface QuantileTriple {
  q10: number;
  q50: number;
  q90: number;
}

export const QUANTILES = { q10: 0.1, q50: 0.5, q90: 0.9 } as const;

export function intervalCoverage(predictions: readonly QuantileTriple[], outcome: ArrayLike<number>): number {
  let inside = 0;
  predictions.forEach((p, i) => {
    if (outcome[i]! >= p.q10 && outcome[i]! <= p.q90) inside++;
  });
  return inside / predictions.length;
}

/** Coverage within each third of the rows, ordered by interval width. */
export function coverageByWidthTercile(predictions: readonly QuantileTriple[], outcome: ArrayLike<number>): [number, number, number] {
  const order = predictions.map((_, i) => i).sort((a, b) => predictions[a]!.q90 - predictions[a]!.q10 - (predictions[b]!.q90 - predictions[b]!.q10));
  const third = (k: number) => {
    const rows = order.slice(Math.floor((k * order.length) / 3), Math.floor(((k + 1) * order.length) / 3));
    return intervalCoverage(
      rows.map((i) => predictions[i]!),
      rows.map((i) => outcome[i]!),
    );
  };
  return [third(0), third(1), third(2)];
}

/**
 * Rows grouped by deciles of one input: the cut points are the values at the 10%, 20%, ... 90% ranks, and
 * every row with the same value lands in the same group, so an input whose one value spans several deciles
 * (floor 0, an empty queue) gives fewer than ten groups. Groups in increasing order of the input.
 */
function decileGroups(values: ArrayLike<number>, groups = 10): number[][] {
  const n = values.length;
  const sorted = Float64Array.from(values).sort();
  const cuts: number[] = [];
  for (let k = 1; k < groups; k++) {
    const cut = sorted[Math.floor((k * n) / groups)]!;
    if (cuts.length === 0 || cut > cuts[cuts.length - 1]!) cuts.push(cut);
  }
  // A row's group is the number of cuts below its value; the top cut's own rows join the group below it.
  const out: number[][] = Array.from({ length: cuts.length + 1 }, () => []);
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    let lo = 0;
    let hi = cuts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cuts[mid]! < v) lo = mid + 1;
      else hi = mid;
    }
    out[lo]!.push(i);
  }
  return out.filter((g) => g.length > 0);
}

/** One decile group of a quantile model's test rows: the input's range in it, its size, coverage and width. */
export interface CoverageGroup {
  from: number;
  to: number;
  n: number;
  coverage80: number;
  meanWidthMin: number;
}

/** Coverage and mean width of the 80% interval within each decile group of one input. */
export function coverageByDecile(values: ArrayLike<number>, predictions: readonly QuantileTriple[], outcome: ArrayLike<number>): CoverageGroup[] {
  return decileGroups(values).map((rows) => {
    const p = rows.map((i) => predictions[i]!);
    const y = rows.map((i) => outcome[i]!);
    const v = rows.map((i) => values[i]!);
    return { from: Math.min(...v), to: Math.max(...v), n: rows.length, coverage80: intervalCoverage(p, y), meanWidthMin: meanWidth(p) };
  });
}

/** One decile group of the classifier's test rows: mean predicted probability against the observed rate. */
export interface CalibrationGroup {
  from: number;
  to: number;
  n: number;
  meanProbability: number;
  observedRate: number;
}

export function calibrationByDecile(values: ArrayLike<number>, probability: ArrayLike<number>, label: ArrayLike<number>): CalibrationGroup[] {
  return decileGroups(values).map((rows) => {
    const v = rows.map((i) => values[i]!);
    return {
      from: Math.min(...v),
      to: Math.max(...v),
      n: rows.length,
      meanProbability: mean(rows.map((i) => probability[i]!)),
      observedRate: mean(rows.map((i) => label[i]!)),
    };
  });
}

export function meanWidth(predictions: readonly QuantileTriple[]): number {
  return predictions.reduce((sum, p) => sum + (p.q90 - p.q10), 0) / predictions.length;
}

/** Mean pinball loss per quantile level and averaged over the three. */
export function pinballLosses(predictions: readonly QuantileTriple[], outcome: ArrayLike<number>): QuantileTriple & { mean: number } {
  const out = { q10: 0, q50: 0, q90: 0 };
  for (const key of ['q10', 'q50', 'q90'] as const) {
    let sum = 0;
    predictions.forEach((p, i) => {
      sum += pinball(outcome[i]!, p[key], QUANTILES[key]);
    });
    out[key] = sum / predictions.length;
  }
  return { ...out, mean: (out.q10 + out.q50 + out.q90) / 3 };
}

/** Share of predictions whose quantiles are out of order (q10 > q50 or q50 > q90). */
export function crossingRate(predictions: readonly QuantileTriple[]): number {
  return predictions.filter((p) => p.q10 > p.q50 || p.q50 > p.q90).length / predictions.length;
}

export function brierScore(probability: ArrayLike<number>, label: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < label.length; i++) sum += (probability[i]! - label[i]!) ** 2;
  return sum / label.length;
}

export function logLoss(probability: ArrayLike<number>, label: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < label.length; i++) {
    const p = Math.min(1 - 1e-12, Math.max(1e-12, probability[i]!));
    sum -= label[i]! * Math.log(p) + (1 - label[i]!) * Math.log(1 - p);
  }
  return sum / label.length;
}

/**
 * Expected calibration error: predictions in `bins` equal-width probability bins, the row-weighted mean
 * of |mean predicted - observed rate| per bin.
 */
export function expectedCalibrationError(probability: ArrayLike<number>, label: ArrayLike<number>, bins = 10): number {
  const sumP = new Float64Array(bins);
  const sumY = new Float64Array(bins);
  const count = new Float64Array(bins);
  for (let i = 0; i < label.length; i++) {
    const b = Math.min(bins - 1, Math.floor(probability[i]! * bins));
    sumP[b]! += probability[i]!;
    sumY[b]! += label[i]!;
    count[b]! += 1;
  }
  let ece = 0;
  for (let b = 0; b < bins; b++) if (count[b]! > 0) ece += Math.abs(sumP[b]! - sumY[b]!);
  return ece / label.length;
}

export const mean = (values: ArrayLike<number>) => {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return sum / values.length;
};

const triple = z.object({ q10: z.number(), q50: z.number(), q90: z.number() });
const losses = triple.extend({ mean: z.number() });
const splitSizes = z.object({ train: z.number().int(), validation: z.number().int(), calibration: z.number().int(), test: z.number().int() });

const coverageGroup = z.object({ from: z.number(), to: z.number(), n: z.number().int(), coverage80: z.number(), meanWidthMin: z.number() });
const calibrationGroup = z.object({ from: z.number(), to: z.number(), n: z.number().int(), meanProbability: z.number(), observedRate: z.number() });

const quantileModelMetrics = z.object({
  version: z.string(),
  samples: splitSizes,
  trees: triple,
  /** Share of test outcomes inside [q10, q90] as served (target 0.80). */
  coverage80: z.number(),
  meanWidthMin: z.number(),
  medianWidthMin: z.number(),
  /**
   * Coverage within the narrowest, middle and widest third of the test intervals: the guarantee is
   * marginal, so this shows how evenly the intervals adapt to conditions.
   */
  coverageByWidthTercile: z.tuple([z.number(), z.number(), z.number()]),
  /**
   * Coverage and width within the deciles of the inputs that drive the answer (`SEGMENT_FEATURES`), by
   * input name: where the marginal 80% holds is as important as that it holds on average.
   */
  coverageByDecile: z.record(z.string(), z.array(coverageGroup)),
  /** The same before the conformal shift (the raw quantile models). */
  uncalibratedCoverage80: z.number(),
  /** Log-scale conformal shifts of q10 (down) and q90 (up). */
  conformalShift: z.object({ lower: z.number(), upper: z.number() }),
  /** Mean pinball loss (minutes) of the served quantiles on the test split. */
  pinball: losses,
  /** The same for the training-set quantiles of the target, a constant per level. */
  baselinePinball: losses,
  baselineCoverage80: z.number(),
  baselineWidthMin: z.number(),
  /** Share of test rows whose raw q10 / q50 / q90 crossed before sorting. */
  crossingRateBeforeSorting: z.number(),
  /** The figure the specification reports for this model. */
  specCoverage80: z.number(),
});

const classifierMetrics = z.object({
  version: z.string(),
  samples: splitSizes,
  trees: z.number().int(),
  rocAuc: z.number(),
  brier: z.number(),
  logLoss: z.number(),
  /** Expected calibration error, 10 equal-width bins. */
  ece: z.number(),
  /** The boosted model before isotonic calibration. */
  uncalibrated: z.object({ rocAuc: z.number(), brier: z.number(), ece: z.number() }),
  /** Mean predicted probability against the observed success rate within the deciles of the main inputs. */
  calibrationByDecile: z.record(z.string(), z.array(calibrationGroup)),
  /** Success rate on the test split, and on the training split (the baseline predictor). */
  baseRate: z.number(),
  trainBaseRate: z.number(),
  /** Brier and log loss of always answering the training base rate. */
  baselineBrier: z.number(),
  baselineLogLoss: z.number(),
  /** ROC-AUC and Brier of the generator's true probabilities: the best any model can do on this data. */
  oracleRocAuc: z.number(),
  oracleBrier: z.number(),
  specRocAuc: z.number(),
  specBaseRate: z.number(),
});

/** metrics.json: what `npm run train` measured on the held-out test split. */
export const metricsReportSchema = z.object({
  seed: z.number().int(),
  trainedAt: z.iso.datetime(),
  trainingSeconds: z.number(),
  data: z.string(),
  dwell: quantileModelMetrics,
  travel: quantileModelMetrics,
  locker: classifierMetrics,
});

export type SplitSizes = z.infer<typeof splitSizes>;
export type QuantileModelMetrics = z.infer<typeof quantileModelMetrics>;
export type ClassifierMetrics = z.infer<typeof classifierMetrics>;
export type MetricsReport = z.infer<typeof metricsReportSchema>;
