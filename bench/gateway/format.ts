/*
 * How the benchmark's tables write figures.
 */

/** A figure with `digits` decimals, grouped by thousands; a dash for none. */
export const fmt = (x: number | null, digits = 1) =>
  x === null || Number.isNaN(x) ? '–' : x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** `a` over `b` as `1.23x`; a dash when `b` is not positive. */
export const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}x` : '–');
