import { Random } from '../../platform/random.js';
import { rocAuc, sigmoid } from '../../platform/statistics.js';

/**
 * Small, dependable models for measuring what a frame is worth: L2-regularized logistic regression
 * (Newton's method) for the classifiers and ridge regression for pricing, on standardized columns with a
 * missing indicator per column that has nulls, plus the metrics and permutation importance.
 */

export type Task = 'classification' | 'regression';

interface ColumnPrep {
  log: boolean;
  mean: number;
  sd: number;
  indicator: boolean;
}

export interface FittedModel {
  predict(columns: readonly Float64Array[]): Float64Array;
}

const slog = (x: number) => Math.sign(x) * Math.log1p(Math.abs(x));

function prepare(columns: readonly Float64Array[]): ColumnPrep[] {
  return columns.map((col) => {
    let n = 0;
    let max = -Infinity;
    for (const x of col)
      if (!Number.isNaN(x)) {
        n++;
        max = Math.max(max, Math.abs(x));
      }
    const log = max > 100;
    let sum = 0;
    for (const x of col) if (!Number.isNaN(x)) sum += log ? slog(x) : x;
    const mean = n > 0 ? sum / n : 0;
    let ss = 0;
    for (const x of col) if (!Number.isNaN(x)) ss += ((log ? slog(x) : x) - mean) ** 2;
    const sd = n > 1 ? Math.sqrt(ss / (n - 1)) : 0;
    return { log, mean, sd, indicator: n > 0 && n < col.length };
  });
}

/** Design rows: [1, standardized columns (constant ones dropped), missing indicators]. */
function design(preps: readonly ColumnPrep[], columns: readonly Float64Array[], rows: number): Float64Array[] {
  const out: Float64Array[] = [];
  for (let i = 0; i < rows; i++) {
    const row: number[] = [1];
    preps.forEach((p, j) => {
      const x = columns[j]![i]!;
      if (p.sd > 0) row.push(Number.isNaN(x) ? 0 : ((p.log ? slog(x) : x) - p.mean) / p.sd);
      if (p.indicator) row.push(Number.isNaN(x) ? 1 : 0);
    });
    out.push(Float64Array.from(row));
  }
  return out;
}

/** Solves A x = b (A symmetric positive definite, small) by Gaussian elimination with partial pivoting. */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let pivot = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[pivot]![c]!)) pivot = r;
    [m[c], m[pivot]] = [m[pivot]!, m[c]!];
    const d = m[c]![c]!;
    if (Math.abs(d) < 1e-12) continue;
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r]![c]! / d;
      if (f === 0) continue;
      for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
    }
  }
  return m.map((row, i) => (Math.abs(row[i]!) < 1e-12 ? 0 : row[n]! / row[i]!));
}

export function fit(task: Task, columns: readonly Float64Array[], y: ArrayLike<number>, lambda = 1): FittedModel {
  const preps = prepare(columns);
  const X = design(preps, columns, y.length);
  const d = X[0]?.length ?? 1;
  let w = new Array<number>(d).fill(0);
  const iterations = task === 'classification' ? 25 : 1;
  for (let it = 0; it < iterations; it++) {
    const H = Array.from({ length: d }, () => new Array<number>(d).fill(0));
    const g = new Array<number>(d).fill(0);
    for (let i = 0; i < X.length; i++) {
      const x = X[i]!;
      let z = 0;
      for (let k = 0; k < d; k++) z += w[k]! * x[k]!;
      const p = task === 'classification' ? 1 / (1 + Math.exp(-z)) : z;
      const weight = task === 'classification' ? Math.max(p * (1 - p), 1e-6) : 1;
      const r = y[i]! - p;
      for (let k = 0; k < d; k++) {
        g[k]! += r * x[k]!;
        const hk = H[k]!;
        for (let l = k; l < d; l++) hk[l]! += weight * x[k]! * x[l]!;
      }
    }
    for (let k = 0; k < d; k++) {
      for (let l = 0; l < k; l++) H[k]![l] = H[l]![k]!;
      // The intercept is not shrunk.
      if (k > 0) {
        H[k]![k]! += lambda;
        g[k]! -= lambda * w[k]!;
      }
    }
    const step = solve(H, g);
    let change = 0;
    w = w.map((wk, k) => {
      change = Math.max(change, Math.abs(step[k]!));
      return wk + step[k]!;
    });
    if (change < 1e-7) break;
  }
  return {
    predict(cols) {
      const rows = cols[0]?.length ?? 0;
      const Xt = design(preps, cols, rows);
      const out = new Float64Array(rows);
      Xt.forEach((x, i) => {
        let z = 0;
        for (let k = 0; k < d; k++) z += w[k]! * x[k]!;
        out[i] = task === 'classification' ? sigmoid(z) : z;
      });
      return out;
    },
  };
}

/** Coefficient of determination; NaN where it is undefined (no rows, or every label equal). */
export function rSquared(prediction: ArrayLike<number>, y: ArrayLike<number>): number {
  if (y.length === 0) return NaN;
  let mean = 0;
  for (let i = 0; i < y.length; i++) mean += y[i]!;
  mean /= y.length;
  let ssRes = 0;
  let ssTot = 0;
  for (let i = 0; i < y.length; i++) {
    ssRes += (y[i]! - prediction[i]!) ** 2;
    ssTot += (y[i]! - mean) ** 2;
  }
  return ssTot === 0 ? NaN : 1 - ssRes / ssTot;
}

export const metricOf = (task: Task) => (task === 'classification' ? rocAuc : rSquared);
export const metricName = (task: Task) => (task === 'classification' ? 'roc_auc' : 'r2_log1p');

/**
 * Why the task's metric cannot be computed on, or a model fitted to, a split of labels (`y` as the
 * model sees them: 0/1 for classification), or null when it can.
 */
export function undefinedOn(task: Task, split: 'training' | 'test', y: ArrayLike<number>): string | null {
  if (y.length === 0) return `the ${split} split has no rows`;
  let positives = 0;
  const first = y[0]!;
  let varies = false;
  for (let i = 0; i < y.length; i++) {
    if (y[i]! > 0) positives++;
    if (y[i] !== first) varies = true;
  }
  if (task === 'classification' && (positives === 0 || positives === y.length))
    return `the ${split} split holds one class only (${positives} positive of ${y.length} rows)`;
  if (task === 'regression' && !varies) return `every label of the ${split} split is equal (${y.length} rows)`;
  return null;
}

/** Held-out metric drop when each column is shuffled (mean of `repeats` seeded permutations). */
export function permutationImportance(model: FittedModel, task: Task, columns: readonly Float64Array[], y: ArrayLike<number>, repeats = 3, seed = 7): number[] {
  const metric = metricOf(task);
  const base = metric(model.predict(columns), y);
  const rng = new Random(seed, 'permutation');
  return columns.map((col, j) => {
    let drop = 0;
    for (let r = 0; r < repeats; r++) {
      const shuffled = Float64Array.from(col);
      for (let i = shuffled.length - 1; i > 0; i--) {
        const k = rng.int(i + 1);
        [shuffled[i], shuffled[k]] = [shuffled[k]!, shuffled[i]!];
      }
      const cols = columns.map((c, i) => (i === j ? shuffled : c));
      drop += base - metric(model.predict(cols), y);
    }
    return drop / repeats;
  });
}
