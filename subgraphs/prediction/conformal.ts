/*
 * Conformalized quantile regression (Romano, Patterson and Candès, 2019), asymmetric form, on the log
 * scale the quantile models predict in. On a calibration split the models never saw, the lower score
 * is how far an outcome falls below the predicted q10 and the upper score how far it rises above the
 * predicted q90; each bound moves by the finite-sample (1 - α/2) quantile of its score. For exchangeable
 * data each side then misses with probability at most α/2, so [q10, q90] covers at least 1 - α. Because
 * the shift is on the log scale, it widens long intervals more than short ones (heteroscedasticity is
 * kept).
 */

export interface ConformalAdjustment {
  /** Miscoverage the interval is calibrated for (0.2: an 80% interval). */
  alpha: number;
  /** Log-scale shift subtracted from the q10 model (negative narrows). */
  lower: number;
  /** Log-scale shift added to the q90 model. */
  upper: number;
  calibrationSize: number;
}

/**
 * The ⌈(n + 1)·level⌉-th smallest score: the conformal quantile with the finite-sample guarantee.
 * With too few scores for that rank, no finite shift is guaranteed, and the answer is +∞.
 */
export function conformalQuantile(scores: ArrayLike<number>, level: number): number {
  const sorted = Float64Array.from(scores).sort();
  const rank = Math.ceil((sorted.length + 1) * level);
  if (rank > sorted.length) return Number.POSITIVE_INFINITY;
  return sorted[Math.max(rank, 1) - 1]!;
}

/** Fits the two shifts from calibration predictions (log scale) and outcomes (log scale). */
export function fitConformal(lower: ArrayLike<number>, upper: ArrayLike<number>, outcome: ArrayLike<number>, alpha: number, digits = 5): ConformalAdjustment {
  const n = outcome.length;
  const below = new Float64Array(n);
  const above = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    below[i] = lower[i]! - outcome[i]!;
    above[i] = outcome[i]! - upper[i]!;
  }
  // Rounded up, so the stored shift is never smaller than the calibrated one.
  const up = (x: number) => Math.ceil(x * 10 ** digits) / 10 ** digits;
  return {
    alpha,
    lower: up(conformalQuantile(below, 1 - alpha / 2)),
    upper: up(conformalQuantile(above, 1 - alpha / 2)),
    calibrationSize: n,
  };
}
