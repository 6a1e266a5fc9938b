import type { VesselPosition, VesselType } from './fleet.js';
import type { Instance, ProblemKind } from './instances.js';
import type { JobResult } from './job.js';

/*
 * The optimization subgraph's records: what its store reads and writes, its service returns and its
 * resolvers shape, and the events its subscriptions deliver.
 */

/** The outbox topics the optimization subgraph writes (subgraphs/optimization/store.ts) and its subscriptions read. */
export const TOPICS = {
  /** fleet-wide, no key; payload: the tick's positions */
  positions: 'optimization.positions',
  /** key: run id; a run's end (completed or failed) */
  run: 'optimization.run',
  /** key: run id; a run recorded RUNNING (its start), for the state caches: the run's end is `run` */
  state: 'optimization.state',
} as const;

/**
 * The types the state tables' rows are (platform/state-trace.ts; index.ts declares the tables): the fleet's
 * clock (one row), the vessels with their positions (keyed by MMSI), the quantum runs (keyed by id, owned
 * by a tenant).
 */
export const STATE_TYPES = { fleet: 'Fleet', vessel: 'Vessel', run: 'QuantumRun' } as const;

export interface VesselRecord extends VesselPosition {
  name: string;
  type: VesselType;
  lane: number;
  tick: number;
  at: string;
}

export interface TrackPointRecord extends VesselPosition {
  tick: number;
  at: string;
}

export interface FleetClockRecord {
  seed: number;
  size: number;
  tick: number;
  updatedAt: string;
}

export type RunStatus = 'running' | 'completed' | 'failed';

export interface RunRecord {
  id: string;
  seq: string;
  /** Whose run it is: the tenant, and the principal of it that started the run. */
  tenant: string;
  principal: string;
  status: RunStatus;
  problem: ProblemKind;
  size: number;
  qubits: number;
  depth: number;
  shots: number;
  seed: number;
  maxEvaluations: number;
  refineTop: number;
  fleetTick: number | null;
  instance: Pick<Instance, 'description' | 'variables' | 'edges'>;
  backend: string;
  result: JobResult | null;
  error: string | null;
  durationMs: number | null;
  createdAt: string;
  completedAt: string | null;
}

export interface RunEventPayload {
  runId: string;
  status: RunStatus;
  at: string;
}

/** A run recorded RUNNING (`TOPICS.state`). */
export interface RunStatePayload {
  runId: string;
}

export interface PositionsEventPayload {
  tick: number;
  at: string;
  positions: VesselPosition[];
}
