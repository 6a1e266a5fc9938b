/*
 * Probability calibration of the locker classifier on the calibration split: isotonic regression
 * (pool-adjacent-violators) of the outcome on the model's log-odds, read as a piecewise-linear curve
 * through the block means, so the map is monotone (the ranking, hence the ROC-AUC, is kept apart from
 * ties at the ends) and needs no parametric shape.
 */

export interface IsotonicCurve {
  /** Increasing log-odds knots. */
  x: number[];
  /** Calibrated probabilities at the knots (non-decreasing). */
  y: number[];
}

/** Fits the isotonic curve; blocks with fewer than `minBlock` rows are merged with a neighbour. */
export function fitIsotonic(score: ArrayLike<number>, outcome: ArrayLike<number>, minBlock = 50, digits = 5): IsotonicCurve {
  const order = Array.from({ length: score.length }, (_, i) => i).sort((a, b) => score[a]! - score[b]!);
  interface Block {
    sumX: number;
    sumY: number;
    n: number;
  }
  const blocks: Block[] = [];
  for (const i of order) {
    blocks.push({ sumX: score[i]!, sumY: outcome[i]!, n: 1 });
    // Pool while the last block violates monotonicity or is too small to stand alone.
    while (blocks.length > 1) {
      const last = blocks[blocks.length - 1]!;
      const prev = blocks[blocks.length - 2]!;
      if (prev.sumY / prev.n < last.sumY / last.n && prev.n >= minBlock) break;
      blocks.pop();
      prev.sumX += last.sumX;
      prev.sumY += last.sumY;
      prev.n += last.n;
    }
  }
  // A small tail block joins its neighbour (which keeps the curve non-decreasing).
  const tail = blocks[blocks.length - 1];
  if (blocks.length > 1 && tail && tail.n < minBlock) {
    blocks.pop();
    const prev = blocks[blocks.length - 1]!;
    prev.sumX += tail.sumX;
    prev.sumY += tail.sumY;
    prev.n += tail.n;
  }
  const round = (v: number) => Number(v.toFixed(digits));
  return { x: blocks.map((b) => round(b.sumX / b.n)), y: blocks.map((b) => round(b.sumY / b.n)) };
}

/** The calibrated probability of a log-odds score: linear between knots, flat beyond the ends. */
export function applyIsotonic(curve: IsotonicCurve, s: number): number {
  const { x, y } = curve;
  const n = x.length;
  if (n === 0) return 1 / (1 + Math.exp(-s));
  if (s <= x[0]!) return y[0]!;
  if (s >= x[n - 1]!) return y[n - 1]!;
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (x[mid]! <= s) lo = mid;
    else hi = mid;
  }
  const t = (s - x[lo]!) / (x[hi]! - x[lo]!);
  return y[lo]! + t * (y[hi]! - y[lo]!);
}
