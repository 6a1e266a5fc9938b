/** ISO 8601 durations of days, hours, minutes and seconds (`P35D`, `PT12H`, `P1DT30M`), as milliseconds. */
const DURATION = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,3})?)S)?)?$/;

export const DURATION_FORMAT = 'must be an ISO 8601 duration in weeks, days, hours, minutes or seconds, e.g. P30D or PT12H';

/** The duration in ms, or null when `text` is not one (years and months have no fixed length: refused). */
export function parseDuration(text: string): number | null {
  const match = DURATION.exec(text);
  if (!match || text === 'P' || text.endsWith('T')) return null;
  const [, w, d, h, m, s] = match;
  const ms = (Number(w ?? 0) * 7 * 86_400 + Number(d ?? 0) * 86_400 + Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(s ?? 0)) * 1000;
  return Number.isSafeInteger(ms) && ms > 0 ? ms : null;
}
