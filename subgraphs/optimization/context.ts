import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';
import type { Principal } from '../../platform/principal.js';
import type { VesselPosition } from './fleet.js';
import type { JobResult } from './job.js';
import type { RunEventPayload, RunRecord, VesselRecord } from './records.js';
import type { OptimizationService } from './service.js';
import type { Verification } from './verify.js';

/*
 * What an optimization resolver receives: the request's context, and the views some GraphQL types are
 * resolved from (their parents in schema-types.ts, generated from the SDL).
 */

export interface OptimizationContext {
  /** The optimization rules and reads (subgraphs/optimization/service.ts): every read and change goes through it. */
  service: OptimizationService;
  events: EventHub;
  clock: Clock;
  loaders: ReturnType<typeof createLoaders>;
  /** Who the request acts for: runs are its tenant's. */
  principal: Principal;
}

export function createLoaders(service: OptimizationService, principal: Principal) {
  return {
    vessel: new DataLoader<string, VesselRecord | null>(async (mmsis) => {
      const rows = new Map((await service.vesselsByMmsi(mmsis)).map((v) => [v.mmsi, v]));
      return mmsis.map((m) => rows.get(m) ?? null);
    }),
    run: new DataLoader<string, RunRecord | null>(async (ids) => {
      const rows = new Map((await service.runsByIds(ids, principal)).map((r) => [r.id, r]));
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
