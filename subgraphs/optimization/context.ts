import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';
import { viewerOf } from '../../platform/ownership.js';
import type { Principal } from '../../platform/principal.js';
import type { VesselPosition } from './fleet.js';
import type { JobResult } from './job.js';
import type { RunService, SafetyService } from './service.js';
import type { OptimizationStore, RunEventPayload, RunRecord, VesselRecord } from './store.js';
import type { Verification } from './verify.js';

/*
 * What an optimization resolver receives: the request's context, and the views some GraphQL types are
 * resolved from (their parents in schema-types.ts, generated from the SDL).
 */

export interface OptimizationContext {
  store: OptimizationStore;
  runs: RunService;
  safety: SafetyService;
  events: EventHub;
  clock: Clock;
  tickIntervalMs: number;
  ready(): Promise<boolean>;
  loaders: ReturnType<typeof createLoaders>;
  /** Who the request acts for: runs are its tenant's. */
  principal: Principal;
}

export function createLoaders(store: OptimizationStore, principal: Principal) {
  const viewer = viewerOf(principal);
  return {
    vessel: new DataLoader<string, VesselRecord | null>(async (mmsis) => {
      const rows = new Map((await store.vesselsByMmsi(mmsis)).map((v) => [v.mmsi, v]));
      return mmsis.map((m) => rows.get(m) ?? null);
    }),
    run: new DataLoader<string, RunRecord | null>(async (ids) => {
      const rows = new Map((await store.runsByIds(ids, viewer)).map((r) => [r.id, r]));
      return ids.map((id) => rows.get(id) ?? null);
    }),
  };
}

/** A fleet safety proof as of one fleet tick. */
export type SafetyView = Verification & { tick: number; timestamp: string };

/** A run's refined solution, its random-start baseline and the exact optimum, as the job reported them. */
export type RefinedView = JobResult['refined'];
export type BaselineView = JobResult['baseline'];
export type OptimumView = JobResult['optimum'];

/** A run event as delivered: its payload and its cursor. */
export type RunEventView = RunEventPayload & { cursor: string };

/** A positions event as delivered: its cursor, tick and the positions the subscriber asked for. */
export interface PositionsEventView {
  cursor: string;
  tick: number;
  at: string;
  positions: (VesselPosition & { tick: number; at: string })[];
}
