import { Random, type RandomState } from '../../platform/random.js';

/**
 * The link model: how a bonded session's paths behave over (simulated) time. Each metric follows a
 * mean-reverting random walk in log space (an Ornstein-Uhlenbeck process, discretized exactly, so any
 * step length is stable); each path fails on its own (Poisson failures, log-normal repair times) and
 * with every shared-risk group it belongs to (a duct, a mast, an operator core, the weather), so paths
 * that share infrastructure go down together. Pure: state in, state out, from a stored PRNG state.
 */

export const PATH_KINDS = ['fiber', 'cable', 'dsl', '5g', 'lte', 'satellite', 'microwave'] as const;
export type PathKind = (typeof PATH_KINDS)[number];

export interface OutageProfile {
  /** Mean failures per hour while up. */
  failuresPerHour: number;
  /** Median repair time in minutes (log-normal). */
  repairMedianMin: number;
  /** Log-scale spread of the repair time. */
  repairSigma: number;
}

export interface KindProfile extends OutageProfile {
  latencyMs: number;
  jitterMs: number;
  lossPct: number;
  capacityMbps: number;
}

/**
 * Typical figures per access technology: the means the walks revert to and the outage process. They are
 * modelling assumptions in the range operators publish, not measurements of any network.
 */
export const KIND_PROFILES: Readonly<Record<PathKind, KindProfile>> = {
  fiber: { latencyMs: 8, jitterMs: 0.5, lossPct: 0.01, capacityMbps: 1000, failuresPerHour: 1 / 720, repairMedianMin: 240, repairSigma: 0.8 },
  cable: { latencyMs: 15, jitterMs: 2, lossPct: 0.05, capacityMbps: 500, failuresPerHour: 1 / 336, repairMedianMin: 90, repairSigma: 0.9 },
  dsl: { latencyMs: 20, jitterMs: 3, lossPct: 0.1, capacityMbps: 80, failuresPerHour: 1 / 336, repairMedianMin: 120, repairSigma: 0.9 },
  '5g': { latencyMs: 25, jitterMs: 6, lossPct: 0.2, capacityMbps: 300, failuresPerHour: 1 / 48, repairMedianMin: 4, repairSigma: 1.0 },
  lte: { latencyMs: 45, jitterMs: 12, lossPct: 0.5, capacityMbps: 60, failuresPerHour: 1 / 48, repairMedianMin: 5, repairSigma: 1.0 },
  satellite: { latencyMs: 40, jitterMs: 10, lossPct: 0.6, capacityMbps: 150, failuresPerHour: 1 / 6, repairMedianMin: 1, repairSigma: 0.8 },
  microwave: { latencyMs: 5, jitterMs: 1, lossPct: 0.05, capacityMbps: 500, failuresPerHour: 1 / 720, repairMedianMin: 60, repairSigma: 0.8 },
};

/**
 * Shared-risk groups by the prefix of their name (`conduit:street-a`): infrastructure whose failure takes
 * down every path that depends on it.
 */
const RISK_GROUP_PROFILES: Readonly<Record<string, OutageProfile & { meaning: string }>> = {
  conduit: { failuresPerHour: 1 / 2000, repairMedianMin: 360, repairSigma: 0.7, meaning: 'a duct or trench shared by cables into the building (a dig-up)' },
  power: { failuresPerHour: 1 / 1000, repairMedianMin: 120, repairSigma: 1.0, meaning: 'power of a street cabinet or remote node' },
  'cell-site': { failuresPerHour: 1 / 300, repairMedianMin: 45, repairSigma: 0.9, meaning: 'a mast: its power, backhaul or radio units' },
  'operator-core': { failuresPerHour: 1 / 1500, repairMedianMin: 90, repairSigma: 0.8, meaning: "a mobile operator's core network" },
  weather: { failuresPerHour: 1 / 72, repairMedianMin: 20, repairSigma: 0.8, meaning: 'heavy rain: fades satellite and microwave links' },
};
const DEFAULT_RISK_GROUP: OutageProfile = { failuresPerHour: 1 / 1000, repairMedianMin: 60, repairSigma: 1.0 };

export function riskGroupProfile(name: string): OutageProfile {
  const prefix = name.split(':')[0] ?? name;
  return RISK_GROUP_PROFILES[prefix] ?? DEFAULT_RISK_GROUP;
}

/** Long-run share of time down of an alternating up/down process: lambda E[D] / (1 + lambda E[D]). */
export function unavailability(p: OutageProfile): number {
  const meanRepairHours = (p.repairMedianMin / 60) * Math.exp((p.repairSigma * p.repairSigma) / 2);
  const x = p.failuresPerHour * meanRepairHours;
  return x / (1 + x);
}

/** One path of a session as the link model keeps it. */
export interface PathState {
  id: string;
  kind: PathKind;
  /** Shared-risk group names, sorted. */
  sharedRisk: string[];
  latencyMs: number;
  jitterMs: number;
  lossPct: number;
  capacityMbps: number;
  /** Simulated second until which the path's own fault lasts; null when it has none. */
  downUntil: number | null;
  /** Derived: no own fault and every group up. */
  up: boolean;
}

export interface LinkModelState {
  /** Simulated seconds since the session started. */
  simSeconds: number;
  rng: RandomState;
  paths: PathState[];
  /** Groups in outage: name -> simulated second the outage ends. */
  groupsDown: Record<string, number>;
}

export interface PathSpec {
  id: string;
  kind: PathKind;
  sharedRisk: string[];
}

/** A new session's paths when the caller names none: two wired paths in one duct, two radios on one mast, a satellite. */
export const DEFAULT_TOPOLOGY: readonly PathSpec[] = [
  { id: 'fiber-1', kind: 'fiber', sharedRisk: ['conduit:street-a'] },
  { id: 'cable-1', kind: 'cable', sharedRisk: ['conduit:street-a', 'power:cabinet-7'] },
  { id: '5g-1', kind: '5g', sharedRisk: ['cell-site:mast-12', 'operator-core:op-a'] },
  { id: 'lte-1', kind: 'lte', sharedRisk: ['cell-site:mast-12', 'operator-core:op-a'] },
  { id: 'sat-1', kind: 'satellite', sharedRisk: ['weather:local'] },
];

/** Stationary log-scale spread of each metric around its mean, and the reversion time (simulated seconds). */
const WALK = { latency: 0.15, jitter: 0.35, loss: 0.6, capacity: 0.12, reversionSeconds: 600 };

export function initialState(specs: readonly PathSpec[], seed: number): LinkModelState {
  const rng = new Random(seed, 'link-model');
  const paths = specs.map((s): PathState => {
    const k = KIND_PROFILES[s.kind];
    return {
      id: s.id,
      kind: s.kind,
      sharedRisk: [...new Set(s.sharedRisk)].sort(),
      latencyMs: round(k.latencyMs * Math.exp(WALK.latency * rng.normalUnpaired()), 3),
      jitterMs: round(k.jitterMs * Math.exp(WALK.jitter * rng.normalUnpaired()), 3),
      lossPct: round(k.lossPct * Math.exp(WALK.loss * rng.normalUnpaired()), 4),
      capacityMbps: round(k.capacityMbps * Math.exp(WALK.capacity * rng.normalUnpaired()), 2),
      downUntil: null,
      up: true,
    };
  });
  return { simSeconds: 0, rng: rng.state(), paths, groupsDown: {} };
}

/** What one step changed, for the control plane and the event stream. */
export interface LinkChange {
  pathId: string | null;
  group: string | null;
  change: 'down' | 'up';
  cause: string;
}

/** Advances the model by `dt` simulated seconds. Deterministic for a given state. */
export function step(state: LinkModelState, dt: number): { state: LinkModelState; changes: LinkChange[] } {
  const rng = Random.fromState(state.rng);
  const t = state.simSeconds + dt;
  const changes: LinkChange[] = [];
  const groupsDown: Record<string, number> = {};
  const groups = [...new Set(state.paths.flatMap((p) => p.sharedRisk))].sort();
  for (const g of groups) {
    const until = state.groupsDown[g];
    if (until !== undefined && until > t) {
      groupsDown[g] = until;
      continue;
    }
    if (until !== undefined) changes.push({ pathId: null, group: g, change: 'up', cause: `${g} restored` });
    const profile = riskGroupProfile(g);
    const end = failureEnd(rng, profile, state.simSeconds, dt);
    if (end !== null) {
      groupsDown[g] = end;
      changes.push({ pathId: null, group: g, change: 'down', cause: `${g} failed` });
    }
  }
  const decay = Math.exp(-dt / WALK.reversionSeconds);
  const spread = Math.sqrt(1 - decay * decay);
  const walk = (value: number, mean: number, sd: number, digits: number) =>
    round(Math.exp(Math.log(mean) + (Math.log(value) - Math.log(mean)) * decay + sd * spread * rng.normalUnpaired()), digits);
  const paths = state.paths.map((p): PathState => {
    const k = KIND_PROFILES[p.kind];
    let downUntil = p.downUntil !== null && p.downUntil > t ? p.downUntil : null;
    if (downUntil === null && p.downUntil === null) downUntil = failureEnd(rng, k, state.simSeconds, dt);
    const next: PathState = {
      ...p,
      latencyMs: walk(p.latencyMs, k.latencyMs, WALK.latency, 3),
      jitterMs: walk(p.jitterMs, k.jitterMs, WALK.jitter, 3),
      lossPct: Math.min(100, walk(p.lossPct, k.lossPct, WALK.loss, 4)),
      capacityMbps: walk(p.capacityMbps, k.capacityMbps, WALK.capacity, 2),
      downUntil,
      up: downUntil === null && p.sharedRisk.every((g) => groupsDown[g] === undefined),
    };
    if (p.up !== next.up) {
      const cause = next.up
        ? 'restored'
        : downUntil !== null && p.downUntil === null
          ? `${p.kind} fault`
          : `shared risk ${p.sharedRisk.filter((g) => groupsDown[g] !== undefined).join(', ')} down`;
      changes.push({ pathId: p.id, group: null, change: next.up ? 'up' : 'down', cause });
    }
    return next;
  });
  return { state: { simSeconds: t, rng: rng.state(), paths, groupsDown }, changes };
}

/**
 * Whether a fault starts during the step (from - 0, from + dt], and when it ends if it is still present at
 * the end of the step. The start is uniform within the step, so a fault shorter than a step may come and
 * go between two samples, as it would between two probes: the state seen at each step is an unbiased
 * sample of the continuous process whatever the step length.
 */
function failureEnd(rng: Random, p: OutageProfile, from: number, dt: number): number | null {
  if (rng.next() >= 1 - Math.exp((-p.failuresPerHour * dt) / 3600)) return null;
  const end = from + rng.next() * dt + p.repairMedianMin * Math.exp(p.repairSigma * rng.normalUnpaired()) * 60;
  return end > from + dt ? end : null;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
