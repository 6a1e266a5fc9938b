/*
 * Feature binning for histogram gradient boosting: each feature gets at most MAX_BINS - 1 increasing
 * thresholds, and every value is replaced by its bin index (one byte), so a split search scans at most
 * 64 histogram cells per feature instead of every distinct value.
 */

export const MAX_BINS = 64;

/** A feature matrix, row-major: value of feature j of row i at `values[i * width + j]`. */
export interface Matrix {
  rows: number;
  width: number;
  values: Float64Array;
}

export function matrixOf(vectors: readonly Float64Array[]): Matrix {
  const width = vectors[0]?.length ?? 0;
  const values = new Float64Array(vectors.length * width);
  vectors.forEach((v, i) => values.set(v, i * width));
  return { rows: vectors.length, width, values };
}

/** Cut points placed by rank (quantiles); the rest of the MAX_BINS - 1 are spaced evenly over the values. */
const QUANTILE_CUTS = 47;

/**
 * Bin edges per feature: at most MAX_BINS - 1 increasing thresholds. A value x falls in bin
 * b = #{edges < x}, so "bin <= b" is "x <= edges[b]". Few distinct values get midpoints between them;
 * many get QUANTILE_CUTS quantiles (resolution where the rows are) plus cuts spaced evenly between the
 * smallest and largest value (resolution where they are not: quantile bins alone would lump a thin tail,
 * the 20th to the 60th floor or 400 to 1,440 minutes, into one bin with one answer).
 */
export function fitEdges(m: Matrix, significant = 6): number[][] {
  const edges: number[][] = [];
  const column = new Float64Array(m.rows);
  for (let j = 0; j < m.width; j++) {
    for (let i = 0; i < m.rows; i++) column[i] = m.values[i * m.width + j]!;
    column.sort();
    const distinct: number[] = [];
    for (let i = 0; i < column.length; i++) if (i === 0 || column[i] !== column[i - 1]) distinct.push(column[i]!);
    let candidates: number[];
    if (distinct.length <= MAX_BINS) {
      candidates = distinct.slice(1).map((v, i) => (v + distinct[i]!) / 2);
    } else {
      candidates = [];
      for (let k = 1; k <= QUANTILE_CUTS; k++) candidates.push(column[Math.floor((k * column.length) / (QUANTILE_CUTS + 1))]!);
      const lo = column[0]!;
      const hi = column[column.length - 1]!;
      const spaced = MAX_BINS - 1 - QUANTILE_CUTS;
      for (let k = 1; k <= spaced; k++) candidates.push(lo + ((hi - lo) * k) / (spaced + 1));
      candidates.sort((a, b) => a - b);
    }
    const rounded = candidates.map((v) => Number(v.toPrecision(significant)));
    edges.push(rounded.filter((v, i) => i === 0 || v > rounded[i - 1]!));
  }
  return edges;
}

export interface Binned {
  rows: number;
  width: number;
  bins: Uint8Array;
}

export function binMatrix(m: Matrix, edges: readonly number[][]): Binned {
  const bins = new Uint8Array(m.rows * m.width);
  for (let j = 0; j < m.width; j++) {
    const e = edges[j]!;
    for (let i = 0; i < m.rows; i++) bins[i * m.width + j] = binOf(e, m.values[i * m.width + j]!);
  }
  return { rows: m.rows, width: m.width, bins };
}

/** #{edges < x}, by binary search. */
function binOf(edges: readonly number[], x: number): number {
  let lo = 0;
  let hi = edges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (edges[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
