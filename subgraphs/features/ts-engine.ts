import type { Availability, LabelRows, Matches, ViewData } from './frame.js';

/**
 * A feature view sorted for as-of lookups: rows bucketed by entity (counting sort, O(n)), each bucket
 * ordered by (feature_timestamp, created_timestamp, row index). The last row of a bucket with
 * feature_timestamp <= t is then the point-in-time answer: the latest timestamp, and on a tie the latest
 * created_timestamp, then the later row. Built once per view and reused by every join.
 */
export interface SortedView {
  view: ViewData;
  /** Bucket of entity code e is order[start[e] .. start[e + 1]). */
  start: Int32Array;
  order: Int32Array;
  /** ts in sorted order, for cache-friendly scans. */
  sortedTs: Float64Array;
}

export function sortView(view: ViewData): SortedView {
  const { start, order } = bucketSort(view.entityCode, view.length, view.entityCount);
  const before = (a: number, b: number) =>
    view.ts[a]! < view.ts[b]! || (view.ts[a] === view.ts[b] && (view.created[a]! < view.created[b]! || (view.created[a] === view.created[b] && a < b)));
  sortBuckets(start, order, before);
  const sortedTs = new Float64Array(view.length);
  for (let i = 0; i < view.length; i++) sortedTs[i] = view.ts[order[i]!]!;
  return { view, start, order, sortedTs };
}

/**
 * The sort-merge as-of join: label rows are bucketed by entity and sorted by event time too, then each
 * entity's labels and feature rows are walked together once (a merge, no search). `ttlMs` overrides the
 * view's TTL. AS_KNOWN walks back from the event-time answer to the latest row already created at the
 * event (rows are in (ts, created) order, so that row is the greatest allowed; a correction usually sits
 * right behind it).
 */
export function tsAsOf(sorted: SortedView, labels: LabelRows, ttlMs: number | null, availability: Availability): Matches {
  const { view, start, order, sortedTs } = sorted;
  const created = view.created;
  const asKnown = availability === 'AS_KNOWN';
  const out = new Int32Array(labels.length).fill(-1);
  const keys = labels.keys[view.entity];
  // Labels whose key is outside the view's dictionary (or -1) never match: leave them out of the buckets.
  const codes = new Int32Array(labels.length);
  for (let i = 0; i < labels.length; i++) {
    const k = keys[i]!;
    codes[i] = k >= 0 && k < view.entityCount ? k : view.entityCount;
  }
  const labelBuckets = bucketSort(codes, labels.length, view.entityCount + 1);
  const lts = labels.ts;
  sortBuckets(labelBuckets.start, labelBuckets.order, (a, b) => lts[a]! < lts[b]! || (lts[a] === lts[b] && a < b));
  const ttl = ttlMs;
  for (let e = 0; e < view.entityCount; e++) {
    const lEnd = labelBuckets.start[e + 1]!;
    let p = start[e]! - 1;
    const fEnd = start[e + 1]!;
    for (let li = labelBuckets.start[e]!; li < lEnd; li++) {
      const label = labelBuckets.order[li]!;
      const t = lts[label]!;
      while (p + 1 < fEnd && sortedTs[p + 1]! <= t) p++;
      let q = p;
      if (asKnown) while (q >= start[e]! && created[order[q]!]! > t) q--;
      if (q < start[e]!) continue;
      if (ttl !== null && sortedTs[q]! < t - ttl) continue;
      out[label] = order[q]!;
    }
  }
  return out;
}

/** Stable counting sort of row indices by code (0..buckets-1). */
function bucketSort(codes: Int32Array, length: number, buckets: number): { start: Int32Array; order: Int32Array } {
  const start = new Int32Array(buckets + 1);
  for (let i = 0; i < length; i++) start[codes[i]! + 1]!++;
  for (let b = 0; b < buckets; b++) start[b + 1]! += start[b]!;
  const fill = start.slice(0, buckets);
  const order = new Int32Array(length);
  for (let i = 0; i < length; i++) order[fill[codes[i]!]!++] = i;
  return { start, order };
}

/** Sorts each bucket in place: insertion sort for the short buckets entities have, a merge sort beyond. */
function sortBuckets(start: Int32Array, order: Int32Array, before: (a: number, b: number) => boolean): void {
  for (let b = 0; b + 1 < start.length; b++) {
    const lo = start[b]!;
    const hi = start[b + 1]!;
    if (hi - lo < 2) continue;
    if (hi - lo <= 32) {
      for (let i = lo + 1; i < hi; i++) {
        const x = order[i]!;
        let j = i - 1;
        while (j >= lo && before(x, order[j]!)) {
          order[j + 1] = order[j]!;
          j--;
        }
        order[j + 1] = x;
      }
    } else {
      const sorted = Array.from(order.subarray(lo, hi)).sort((x, y) => (before(x, y) ? -1 : before(y, x) ? 1 : 0));
      order.set(sorted, lo);
    }
  }
}
