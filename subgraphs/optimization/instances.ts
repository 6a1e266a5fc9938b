import { plane, type VesselPosition } from './fleet.js';
import { KNOT_MPS } from './geo.js';
import { random3Regular } from './graphs.js';
import { maxCutProblem, quboProblem, type IsingProblem, type WeightedEdge } from './problem.js';

export const PROBLEM_KINDS = ['CONVOY_MAXCUT', 'BERTH_QUBO', 'REGULAR3_MAXCUT'] as const;
export type ProblemKind = (typeof PROBLEM_KINDS)[number];

/** The instance a run solves: its Ising form and what it means in the fleet's terms. */
export interface Instance {
  kind: ProblemKind;
  size: number;
  problem: IsingProblem;
  /** What each bit is (a vessel, a vessel-slot pair, a graph vertex). */
  variables: string[];
  edges: WeightedEdge[];
  description: string;
}

/** Qubits an instance of this kind and size needs. */
export function qubitsFor(kind: ProblemKind, size: number): number {
  return kind === 'BERTH_QUBO' ? size * size : size;
}

/** Allowed sizes by kind (the qubit bound applies on top). */
export const SIZE_RANGE: Record<ProblemKind, { min: number; max: number; even?: boolean }> = {
  CONVOY_MAXCUT: { min: 3, max: 24 },
  BERTH_QUBO: { min: 2, max: 4 },
  REGULAR3_MAXCUT: { min: 4, max: 24, even: true },
};

const distanceToPort = (p: VesselPosition) => {
  const q = plane.project(p);
  return Math.hypot(q.x, q.y);
};
const separation = (a: VesselPosition, b: VesselPosition) => {
  const p = plane.project(a);
  const q = plane.project(b);
  return Math.hypot(p.x - q.x, p.y - q.y);
};

/** The `size` vessels closest to the port entrance, nearest first (MMSI breaks ties). */
function nearestToPort(fleet: readonly VesselPosition[], size: number): VesselPosition[] {
  if (fleet.length < size) throw new RangeError(`the fleet has ${fleet.length} vessels, fewer than ${size}`);
  return [...fleet].sort((a, b) => distanceToPort(a) - distanceToPort(b) || a.mmsi.localeCompare(b.mmsi)).slice(0, size);
}

/**
 * Convoy split: the `size` vessels nearest the port entrance go out in two convoys. Vessels that are close
 * conflict (they would bunch in one convoy): weight 3 under 2 km, 2 under 4 km, 1 under 8 km, and every
 * vessel conflicts with at least its two nearest. The split with the most conflict weight between the
 * convoys is the maximum cut of this graph.
 */
export function convoyInstance(fleet: readonly VesselPosition[], size: number): Instance {
  const vessels = nearestToPort(fleet, size);
  const weightOf = (d: number) => (d < 2000 ? 3 : d < 4000 ? 2 : 1);
  const edges = new Map<string, WeightedEdge>();
  const add = (u: number, v: number) => {
    const key = `${Math.min(u, v)}-${Math.max(u, v)}`;
    if (!edges.has(key)) edges.set(key, { u: Math.min(u, v), v: Math.max(u, v), w: weightOf(separation(vessels[u]!, vessels[v]!)) });
  };
  for (let u = 0; u < size; u++) {
    const byDistance = vessels
      .map((other, v) => ({ v, d: separation(vessels[u]!, other) }))
      .filter((x) => x.v !== u)
      .sort((a, b) => a.d - b.d || a.v - b.v);
    for (const [rank, { v, d }] of byDistance.entries()) if (rank < 2 || d < 8000) add(u, v);
  }
  const list = [...edges.values()].sort((a, b) => a.u - b.u || a.v - b.v);
  return {
    kind: 'CONVOY_MAXCUT',
    size,
    problem: maxCutProblem(size, list),
    variables: vessels.map((v) => v.mmsi),
    edges: list,
    description: `Split the ${size} vessels nearest the port entrance into two convoys, maximizing the conflict weight between them (${list.length} conflicts).`,
  };
}

/** Slot length of the berth schedule, hours. */
const SLOT_HOURS = 0.5;

/**
 * Berth-slot assignment as a QUBO: `size` vessels (nearest the entrance) and as many half-hour berth
 * slots. x(v,k) = 1 puts vessel v in slot k. Cost: minutes waiting before the slot when the vessel is
 * early, twice the minutes late when it cannot make the slot, in units of 10 minutes. Penalties A (larger
 * than any cost) make every vessel take exactly one slot and every slot hold at most one vessel.
 */
export function berthInstance(fleet: readonly VesselPosition[], size: number): Instance {
  const vessels = nearestToPort(fleet, size);
  const n = size * size;
  const idx = (v: number, k: number) => v * size + k;
  const cost: number[] = new Array<number>(n).fill(0);
  for (const [v, vessel] of vessels.entries()) {
    const etaMin = distanceToPort(vessel) / (Math.max(vessel.sog, 1) * KNOT_MPS) / 60;
    for (let k = 0; k < size; k++) {
      const start = k * SLOT_HOURS * 60;
      cost[idx(v, k)] = Math.min(20, Math.round((start >= etaMin ? start - etaMin : 2 * (etaMin - start)) / 10));
    }
  }
  const A = Math.max(...cost) + 1;
  const linear = cost.map((c) => c - A);
  const quadratic: WeightedEdge[] = [];
  for (let v = 0; v < size; v++) {
    for (let k = 0; k < size; k++) {
      for (let l = k + 1; l < size; l++) quadratic.push({ u: idx(v, k), v: idx(v, l), w: 2 * A });
      for (let u = v + 1; u < size; u++) quadratic.push({ u: idx(v, k), v: idx(u, k), w: A });
    }
  }
  return {
    kind: 'BERTH_QUBO',
    size,
    problem: quboProblem(n, linear, quadratic, A * size),
    variables: vessels.flatMap((v) => Array.from({ length: size }, (_, k) => `${v.mmsi}@slot${k}`)),
    edges: quadratic,
    description: `Assign the ${size} vessels nearest the port entrance to ${size} half-hour berth slots (${n} binary variables), minimizing waiting and lateness in 10-minute units.`,
  };
}

/** A seeded random 3-regular MaxCut instance (the benchmark family with proven QAOA bounds). */
export function regular3Instance(size: number, seed: number): Instance {
  const edges = random3Regular(size, seed);
  return {
    kind: 'REGULAR3_MAXCUT',
    size,
    problem: maxCutProblem(size, edges),
    variables: Array.from({ length: size }, (_, i) => `v${i}`),
    edges,
    description: `MaxCut of a random 3-regular graph on ${size} vertices (seed ${seed}).`,
  };
}
