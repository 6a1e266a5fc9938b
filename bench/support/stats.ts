/*
 * The benchmarks' statistics, in one place: every percentile in every report is the same nearest-rank
 * quantile, every median the same median.
 */

/** The q-quantile of ascending samples, nearest rank: the smallest sample with at least q of them at or below it. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The median (the mean of the two middle samples of an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** The least-squares slope of y over x (0 when every x is the same). */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

/** `x` rounded to `digits` decimals (one by default). */
export const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
