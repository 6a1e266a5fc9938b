import type { Availability, LabelRows, Matches, ViewData } from './frame.js';

/**
 * The brute-force point-in-time join, written straight from the definition, for checking the engines:
 * for each label row, of all rows of the same entity with feature_timestamp <= event_timestamp (and,
 * with a TTL, feature_timestamp >= event_timestamp - ttl), the greatest by (feature_timestamp,
 * created_timestamp, row index); AS_KNOWN also leaves out rows with created_timestamp > event_timestamp.
 * O(labels x rows): for tests only.
 */
export function oracleAsOf(view: ViewData, labels: LabelRows, availability: Availability): Matches {
  const out = new Int32Array(labels.length).fill(-1);
  const keys = labels.keys[view.entity];
  for (let i = 0; i < labels.length; i++) {
    const key = keys[i]!;
    if (key < 0) continue;
    const t = labels.ts[i]!;
    let best = -1;
    for (let r = 0; r < view.length; r++) {
      if (view.entityCode[r] !== key) continue;
      const ts = view.ts[r]!;
      if (ts > t) continue;
      if (availability === 'AS_KNOWN' && view.created[r]! > t) continue;
      if (view.ttlMs !== null && ts < t - view.ttlMs) continue;
      if (
        best < 0 ||
        ts > view.ts[best]! ||
        (ts === view.ts[best]! && (view.created[r]! > view.created[best]! || (view.created[r] === view.created[best] && r > best)))
      ) {
        best = r;
      }
    }
    out[i] = best;
  }
  return out;
}
