import type { EntityType } from './frame.js';

/*
 * The features subgraph's records: materializations and online rows as its store and online store keep
 * them, its service returns them and its resolvers shape them.
 */

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
