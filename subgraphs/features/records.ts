import { stateTag } from '../../platform/state-trace.js';
import type { EntityType } from './frame.js';
import { VIEW_DEFINITIONS } from './registry.js';

/*
 * The features subgraph's records: materializations and online rows as its store and online store keep
 * them, its service returns them and its resolvers shape them.
 */

/**
 * The types the state tables' rows are (platform/state-trace.ts; index.ts declares the tables): the
 * materializations, and the online rows, keyed by their view (a materialization replaces a view's online
 * rows whole, in the database or in Redis).
 */
export const STATE_TYPES = { materialization: 'FeatureMaterialization', online: 'OnlineFeatures' } as const;

/**
 * The rental subgraph's machines: their status changes (its events, tagged with the type) are what the
 * machine_utilization view is rebuilt from.
 */
export const RENTAL_MACHINE_TYPE = 'Machine';

/** What a materialization of `views` changed: the materializations, this one, and the online rows of each view. */
export const materializationTags = (id: string, views: readonly string[]): string[] => [
  stateTag.collection(STATE_TYPES.materialization),
  stateTag.key(STATE_TYPES.materialization, id),
  stateTag.collection(STATE_TYPES.online),
  ...views.map((v) => stateTag.key(STATE_TYPES.online, v)),
];

/** What an entity's online rows depend on: the online rows of every view of its type, materialized or not. */
export const onlineTags = (entity: EntityType): string[] =>
  VIEW_DEFINITIONS.filter((v) => v.entity === entity).map((v) => stateTag.key(STATE_TYPES.online, v.name));

export interface MaterializedViewRecord {
  view: string;
  version: string;
  rowsWritten: number;
  watermark: number | null;
}

export interface MaterializationRecord {
  id: string;
  asOf: Date;
  watermark: Date | null;
  rowsWritten: number;
  views: MaterializedViewRecord[];
  onlineStore: 'database' | 'redis';
  engine: string;
  milliseconds: number;
  materializedAt: Date;
}

export interface OnlineRow {
  entityType: EntityType;
  entityId: string;
  view: string;
  version: string;
  featureTs: number;
  values: (number | null)[];
}

export interface StoredOnlineRow {
  view: string;
  version: string;
  materializationId: string;
  materializedAt: Date;
  asOf: Date;
  featureTs: Date;
  values: (number | null)[];
}
