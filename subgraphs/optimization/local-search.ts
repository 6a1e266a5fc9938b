import { objectiveOfBits, type IsingProblem } from './problem.js';
import type { Random } from '../../platform/random.js';

export interface LocalSearchResult {
  bits: Uint8Array;
  value: number;
  /** Move evaluations spent (one per single-flip or pair-flip gain computed). */
  evaluations: number;
}

interface Adjacency {
  neighbours: { j: number; w: number }[][];
}

export function adjacencyOf(problem: IsingProblem): Adjacency {
  const neighbours: { j: number; w: number }[][] = Array.from({ length: problem.n }, () => []);
  for (const c of problem.couplings) {
    neighbours[c.i]!.push({ j: c.j, w: c.w });
    neighbours[c.j]!.push({ j: c.i, w: c.w });
  }
  return { neighbours };
}

/**
 * Steepest-ascent local search from `start`: the best improving single flip while one exists; at a
 * one-flip optimum, the best improving flip of two coupled variables (a move one-flip search cannot
 * make when each flip alone loses); stops at a two-flip optimum or when `budget` evaluations are spent.
 */
export function localSearch(problem: IsingProblem, adjacency: Adjacency, start: ArrayLike<number>, budget = Infinity): LocalSearchResult {
  const n = problem.n;
  const bits = Uint8Array.from(start);
  const spin = (i: number) => (bits[i] ? -1 : 1);
  // field_i = h_i + sum_j w_ij s_j; flipping i changes F by -2 s_i field_i.
  const field = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let f = problem.h[i]!;
    for (const { j, w } of adjacency.neighbours[i]!) f += w * spin(j);
    field[i] = f;
  }
  let value = objectiveOfBits(problem, bits);
  let evaluations = 0;
  const flip = (i: number) => {
    const s = spin(i);
    value += -2 * s * field[i]!;
    for (const { j, w } of adjacency.neighbours[i]!) field[j]! -= 2 * w * s;
    bits[i] = bits[i] ? 0 : 1;
  };
  const EPS = 1e-9;
  while (evaluations < budget) {
    let bestGain = EPS;
    let bestI = -1;
    for (let i = 0; i < n && evaluations < budget; i++) {
      evaluations++;
      const gain = -2 * spin(i) * field[i]!;
      if (gain > bestGain) {
        bestGain = gain;
        bestI = i;
      }
    }
    if (bestI >= 0) {
      flip(bestI);
      continue;
    }
    // Pair moves: only coupled pairs can gain when no single flip does.
    let bestPair: [number, number] | null = null;
    bestGain = EPS;
    for (const c of problem.couplings) {
      if (evaluations >= budget) break;
      evaluations++;
      const si = spin(c.i);
      const sj = spin(c.j);
      const gain = -2 * si * field[c.i]! - 2 * sj * field[c.j]! + 4 * c.w * si * sj;
      if (gain > bestGain) {
        bestGain = gain;
        bestPair = [c.i, c.j];
      }
    }
    if (!bestPair) break;
    flip(bestPair[0]);
    flip(bestPair[1]);
  }
  return { bits, value, evaluations };
}

export interface MultiStartResult {
  best: LocalSearchResult;
  starts: number;
  evaluations: number;
}

/** Local search from each start in turn, keeping the best. */
export function refineStarts(problem: IsingProblem, starts: readonly ArrayLike<number>[]): MultiStartResult {
  const adjacency = adjacencyOf(problem);
  let best: LocalSearchResult | null = null;
  let evaluations = 0;
  for (const start of starts) {
    const r = localSearch(problem, adjacency, start);
    evaluations += r.evaluations;
    if (!best || r.value > best.value) best = r;
  }
  if (!best) throw new RangeError('no start to refine');
  return { best, starts: starts.length, evaluations };
}

/**
 * The classical baseline: local search from uniformly random assignments until `budget` move evaluations
 * are spent (the last search is cut off at the budget), so it gets exactly what the refinement got.
 */
export function randomRestarts(problem: IsingProblem, budget: number, rng: Random): MultiStartResult {
  const adjacency = adjacencyOf(problem);
  let best: LocalSearchResult | null = null;
  let evaluations = 0;
  let starts = 0;
  while (evaluations < budget || starts === 0) {
    const start = new Uint8Array(problem.n);
    for (let i = 0; i < problem.n; i++) start[i] = rng.next() < 0.5 ? 1 : 0;
    const r = localSearch(problem, adjacency, start, Math.max(1, budget - evaluations));
    starts++;
    evaluations += r.evaluations;
    if (!best || r.value > best.value) best = r;
  }
  return { best: best!, starts, evaluations };
}
