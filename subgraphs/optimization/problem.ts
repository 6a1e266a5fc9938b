/**
 * Every workload is stated in one form, an Ising objective to MAXIMIZE over n bits:
 *
 *   F(z) = offset + sum_i h_i s_i + sum_(i,j) w_ij s_i s_j,   s_i = 1 - 2 z_i  (bit 0 is spin +1)
 *
 * where z_i is bit i of the basis-state index. MaxCut and QUBO minimization both map onto it exactly, so
 * the simulator, the exact solvers and the local searches share one definition of "energy".
 */
interface Coupling {
  i: number;
  j: number;
  w: number;
}

export interface IsingProblem {
  n: number;
  offset: number;
  h: number[];
  couplings: Coupling[];
}

export interface WeightedEdge {
  u: number;
  v: number;
  w: number;
}

/** MaxCut of a weighted graph: F(z) = the weight of edges whose ends lie on different sides. */
export function maxCutProblem(n: number, edges: readonly WeightedEdge[]): IsingProblem {
  let offset = 0;
  const couplings: Coupling[] = [];
  for (const e of edges) {
    offset += e.w / 2;
    couplings.push({ i: Math.min(e.u, e.v), j: Math.max(e.u, e.v), w: -e.w / 2 });
  }
  return { n, offset, h: new Array<number>(n).fill(0), couplings };
}

/**
 * Minimizing a QUBO f(x) = c + sum_i q_ii x_i + sum_(i<j) q_ij x_i x_j is maximizing F = -f, with
 * x_i = (1 - s_i) / 2.
 */
export function quboProblem(n: number, linear: readonly number[], quadratic: readonly WeightedEdge[], constant = 0): IsingProblem {
  const h = new Array<number>(n).fill(0);
  let offset = -constant;
  for (let i = 0; i < n; i++) {
    const q = linear[i] ?? 0;
    offset -= q / 2;
    h[i]! += q / 2;
  }
  const couplings: Coupling[] = [];
  for (const e of quadratic) {
    offset -= e.w / 4;
    h[e.u]! += e.w / 4;
    h[e.v]! += e.w / 4;
    couplings.push({ i: Math.min(e.u, e.v), j: Math.max(e.u, e.v), w: -e.w / 4 });
  }
  return { n, offset, h, couplings };
}

/** F of one assignment, bit i of `index` being z_i. */
export function objectiveOf(problem: IsingProblem, index: number): number {
  let f = problem.offset;
  for (let i = 0; i < problem.n; i++) f += problem.h[i]! * (((index >>> i) & 1) === 0 ? 1 : -1);
  for (const c of problem.couplings) f += c.w * (((index >>> c.i) ^ (index >>> c.j)) & 1 ? -1 : 1);
  return f;
}

/** F of an assignment given as bits. */
export function objectiveOfBits(problem: IsingProblem, bits: ArrayLike<number>): number {
  let f = problem.offset;
  for (let i = 0; i < problem.n; i++) f += problem.h[i]! * (bits[i] ? -1 : 1);
  for (const c of problem.couplings) f += c.w * (bits[c.i] === bits[c.j] ? 1 : -1);
  return f;
}

/**
 * F of every basis state, 2^n values, built by doubling: the states with bit i set are those below 2^i
 * with bit i flipped, whose change only involves the terms of variable i with lower variables.
 */
export function objectiveDiagonal(problem: IsingProblem): Float64Array {
  const { n } = problem;
  const size = 2 ** n;
  const diag = new Float64Array(size);
  let base = problem.offset;
  for (let i = 0; i < n; i++) base += problem.h[i]!;
  for (const c of problem.couplings) base += c.w;
  diag[0] = base;
  const lower: Coupling[][] = Array.from({ length: n }, () => []);
  // Couplings of i to higher variables, whose spins are still +1 in every state below 2^(i+1).
  const higher = new Float64Array(n);
  for (const c of problem.couplings) {
    const a = Math.min(c.i, c.j);
    const b = Math.max(c.i, c.j);
    lower[b]!.push({ i: b, j: a, w: c.w });
    higher[a]! += c.w;
  }
  for (let i = 0; i < n; i++) {
    const half = 2 ** i;
    const terms = lower[i]!;
    const fixedPart = -2 * problem.h[i]! - 2 * higher[i]!;
    // Spin i goes from +1 to -1: its linear term changes by -2 h_i, each coupling by -2 w s_j.
    for (let k = 0; k < half; k++) {
      let delta = fixedPart;
      for (const t of terms) delta -= 2 * t.w * (((k >>> t.j) & 1) === 0 ? 1 : -1);
      diag[k + half] = diag[k]! + delta;
    }
  }
  return diag;
}

/** The bits of a basis index, z_0 first. */
export function bitsOf(index: number, n: number): Uint8Array {
  const bits = new Uint8Array(n);
  for (let i = 0; i < n; i++) bits[i] = (index >>> i) & 1;
  return bits;
}

/** A bit string as text, z_0 first ("0110..."). */
export const bitString = (bits: ArrayLike<number>) => Array.from(bits, (b) => (b ? '1' : '0')).join('');

/**
 * Where F lies between the worst and the best assignment: (F - Fmin) / (Fmax - Fmin), 1 at the optimum.
 * For MaxCut Fmin is 0 (every vessel in one convoy), so this is the usual cut / maximum cut.
 */
export function approximationRatio(value: number, min: number, max: number): number {
  return max === min ? 1 : (value - min) / (max - min);
}
