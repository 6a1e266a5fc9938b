import { objectiveDiagonal, objectiveOf, type IsingProblem } from './problem.js';

export interface ExactOptimum {
  /** The largest F. */
  max: number;
  /** The smallest F (the other end of the ratio's scale). */
  min: number;
  /** One assignment reaching max, as a basis index. */
  argmax: number;
  method: 'BRUTE_FORCE' | 'BRANCH_AND_BOUND';
  /** Assignments looked at (brute force) or search nodes expanded (branch and bound). */
  work: number;
}

/** Every one of the 2^n assignments (from the diagonal when the caller has it). */
export function bruteForce(problem: IsingProblem, diag: Float64Array = objectiveDiagonal(problem)): ExactOptimum {
  let max = -Infinity;
  let min = Infinity;
  let argmax = 0;
  for (let k = 0; k < diag.length; k++) {
    const v = diag[k]!;
    if (v > max) {
      max = v;
      argmax = k;
    }
    if (v < min) min = v;
  }
  return { max, min, argmax, method: 'BRUTE_FORCE', work: diag.length };
}

/**
 * Exact maximum by depth-first branch and bound. Variables are fixed in order of degree; the bound of a
 * partial assignment is what is fixed plus, for each free variable, the magnitude of its field from the
 * fixed ones and its own h, plus |w| of every coupling between free variables: no completion can beat it.
 */
export function branchAndBound(problem: IsingProblem, sense: 'max' | 'min' = 'max'): ExactOptimum {
  const sign = sense === 'max' ? 1 : -1;
  const { n } = problem;
  const h = problem.h.map((v) => sign * v);
  const neighbours: { j: number; w: number }[][] = Array.from({ length: n }, () => []);
  for (const c of problem.couplings) {
    neighbours[c.i]!.push({ j: c.j, w: sign * c.w });
    neighbours[c.j]!.push({ j: c.i, w: sign * c.w });
  }
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => neighbours[b]!.length - neighbours[a]!.length || a - b);
  const position = new Int32Array(n);
  order.forEach((v, p) => (position[v] = p));
  const spin = new Int8Array(n);
  // field[v] = h_v + sum over fixed neighbours of w * s; freePairs = sum |w| over couplings with both ends free.
  const field = Float64Array.from(h);
  let freePairs = 0;
  for (const c of problem.couplings) freePairs += Math.abs(c.w);
  let best = -Infinity;
  let bestSpins = new Int8Array(n);
  let nodes = 0;
  const fixedValue = { value: sign * problem.offset };

  const bound = (depth: number) => {
    let b = fixedValue.value + freePairs;
    for (let p = depth; p < n; p++) b += Math.abs(field[order[p]!]!);
    return b;
  };

  const visit = (depth: number) => {
    nodes++;
    if (depth === n) {
      if (fixedValue.value > best) {
        best = fixedValue.value;
        bestSpins = Int8Array.from(spin);
      }
      return;
    }
    if (bound(depth) <= best) return;
    const v = order[depth]!;
    // Try the sign its field prefers first: good solutions early make the bound bite.
    const first = field[v]! >= 0 ? 1 : -1;
    for (const s of [first, -first]) {
      // The first variable of a problem without linear terms can stay +1: flipping every spin changes nothing.
      if (depth === 0 && s === -1 && h.every((x) => x === 0)) continue;
      spin[v] = s;
      fixedValue.value += s * field[v]!;
      let freed = 0;
      for (const { j, w } of neighbours[v]!) {
        if (position[j]! > depth) {
          field[j]! += w * s;
          freed += Math.abs(w);
        }
      }
      freePairs -= freed;
      visit(depth + 1);
      freePairs += freed;
      for (const { j, w } of neighbours[v]!) if (position[j]! > depth) field[j]! -= w * s;
      fixedValue.value -= s * field[v]!;
      spin[v] = 0;
    }
  };
  visit(0);
  let argmax = 0;
  for (let i = 0; i < n; i++) if (bestSpins[i] === -1) argmax += 2 ** i;
  const value = objectiveOf(problem, argmax);
  return sense === 'max'
    ? { max: value, min: NaN, argmax, method: 'BRANCH_AND_BOUND', work: nodes }
    : { max: NaN, min: value, argmax, method: 'BRANCH_AND_BOUND', work: nodes };
}

/** Both ends of the scale by branch and bound (no 2^n table). */
export function exactRange(problem: IsingProblem): ExactOptimum {
  const hi = branchAndBound(problem, 'max');
  const lo = branchAndBound(problem, 'min');
  return { max: hi.max, min: lo.min, argmax: hi.argmax, method: 'BRANCH_AND_BOUND', work: hi.work + lo.work };
}
