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

/** `x` rounded to `digits` decimals (one by default). */
export const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
