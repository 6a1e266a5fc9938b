/**
 * The columnar shapes both offline engines work on. Instants are epoch milliseconds in Float64Arrays
 * (exact integers up to 2^53); a feature value of NaN is a null. Entities are dictionary-coded per entity
 * type; a code of -1 in a label row means "no key of this type" and never matches.
 */

export type EntityType = 'policy' | 'claim' | 'machine';

/** One feature view's offline rows, columnar. Row index = insertion order = the final tie-breaker. */
export interface ViewData {
  name: string;
  entity: EntityType;
  features: readonly string[];
  /** Time to live in ms (a row older than event - ttl does not match), or null for none. */
  ttlMs: number | null;
  /** Number of distinct entity codes (codes run 0..entityCount-1). */
  entityCount: number;
  length: number;
  entityCode: Int32Array;
  /** feature_timestamp, epoch ms. */
  ts: Float64Array;
  /** created_timestamp, epoch ms (ties on ts go to the latest). */
  created: Float64Array;
  /** One column per feature; NaN is null. */
  values: Float64Array[];
}

/** The entity data frame: one row per label row, a key column per entity type and the event time. */
export interface LabelRows {
  length: number;
  /** event_timestamp, epoch ms. */
  ts: Float64Array;
  keys: Record<EntityType, Int32Array>;
}

/** For every label row, the index of the matched feature row of one view, or -1 (nulls). */
export type Matches = Int32Array;

/**
 * Which rows a point-in-time join may use for an event at time t.
 * - AS_KNOWN (the default): feature_timestamp <= t and created_timestamp <= t, the value as it was known at
 *   t. A late correction created after the event is not used for it: production never saw it then.
 * - EVENT_TIME: feature_timestamp <= t only (Feast's rule): a correction created after the event, for a
 *   feature_timestamp before it, replaces the value the event saw.
 * Either way the greatest (feature_timestamp, created_timestamp, row) of the rows allowed wins, and the
 * TTL bounds the winner's feature_timestamp.
 */
export type Availability = 'AS_KNOWN' | 'EVENT_TIME';
export const DEFAULT_AVAILABILITY: Availability = 'AS_KNOWN';

export const DAY_MS = 86_400_000;
export const HOUR_MS = 3_600_000;

export function emptyLabels(length: number): LabelRows {
  return {
    length,
    ts: new Float64Array(length),
    keys: { policy: new Int32Array(length).fill(-1), claim: new Int32Array(length).fill(-1), machine: new Int32Array(length).fill(-1) },
  };
}

/** The frame column of a feature: `view__feature`, as Feast names them with full_feature_names. */
export const columnName = (view: string, feature: string) => `${view}__${feature}`;
