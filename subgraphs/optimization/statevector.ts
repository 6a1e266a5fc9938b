import type { Random } from '../../platform/random.js';

/** The name runs record as their backend: an exact simulation on classical hardware, never a QPU. */
export const BACKEND = {
  name: 'statevector-simulator',
  kind: 'SIMULATOR',
  description: 'Exact state-vector simulation in float64 on the CPU (TypeScript, typed arrays); no quantum hardware is involved.',
} as const;

/** The most qubits one run may simulate: 2^24 amplitudes take 256 MiB (re and im, float64). */
const MAX_QUBITS = 24;

/** Qubits below this are rotated inside cache-sized blocks, all of them per block. */
const BLOCK_QUBITS = 12;

/** [c, -is; -is, c] on the pairs (a, a + stride) for a in [from, from + len). */
function single(re: Float64Array, im: Float64Array, from: number, len: number, stride: number, c: number, s: number): void {
  const end = from + len;
  for (let a = from; a < end; a++) {
    const b = a + stride;
    const ar = re[a]!;
    const ai = im[a]!;
    const br = re[b]!;
    const bi = im[b]!;
    re[a] = c * ar + s * bi;
    im[a] = c * ai - s * br;
    re[b] = c * br + s * ai;
    im[b] = c * bi - s * ar;
  }
}

/**
 * RX on two qubits at once on the four amplitudes a, b = a + s1, d = a + s2, e = d + s1: loaded and stored
 * once for both rotations (small enough for V8 to inline into the loops below).
 */
function quad(re: Float64Array, im: Float64Array, a: number, b: number, d: number, e: number, c: number, s: number): void {
  // First qubit: pairs (a, b) and (d, e).
  const ar = c * re[a]! + s * im[b]!;
  const ai = c * im[a]! - s * re[b]!;
  const br = c * re[b]! + s * im[a]!;
  const bi = c * im[b]! - s * re[a]!;
  const dr = c * re[d]! + s * im[e]!;
  const di = c * im[d]! - s * re[e]!;
  const er = c * re[e]! + s * im[d]!;
  const ei = c * im[e]! - s * re[d]!;
  // Second qubit: pairs (a, d) and (b, e).
  re[a] = c * ar + s * di;
  im[a] = c * ai - s * dr;
  re[d] = c * dr + s * ai;
  im[d] = c * di - s * ar;
  re[b] = c * br + s * ei;
  im[b] = c * bi - s * er;
  re[e] = c * er + s * bi;
  im[e] = c * ei - s * br;
}

/** RX on two qubits with strides s1 < s2 for the groups starting at a in [from, from + len). */
function double(re: Float64Array, im: Float64Array, from: number, len: number, s1: number, s2: number, c: number, s: number): void {
  const end = from + len;
  for (let a = from; a < end; a++) quad(re, im, a, a + s1, a + s2, a + s1 + s2, c, s);
}

/** RX on qubits 0 and 1 of [from, to): four neighbouring amplitudes at a time. */
function lowestTwo(re: Float64Array, im: Float64Array, from: number, to: number, c: number, s: number): void {
  for (let a = from; a < to; a += 4) quad(re, im, a, a + 1, a + 2, a + 3, c, s);
}

/** RX on qubits 0..low-1 of the block [from, to) (to - from = 2^low): two qubits per pass. */
function rotateBlock(re: Float64Array, im: Float64Array, low: number, from: number, to: number, c: number, s: number): void {
  let q = 0;
  if (low >= 2) {
    lowestTwo(re, im, from, to, c, s);
    q = 2;
  }
  for (; q + 1 < low; q += 2) {
    const s1 = 2 ** q;
    const s2 = 2 * s1;
    for (let hi = from; hi < to; hi += 2 * s2) {
      for (let mid = hi; mid < hi + s2; mid += 2 * s1) double(re, im, mid, s1, s1, s2, c, s);
    }
  }
  if (q < low) {
    const s1 = 2 ** q;
    for (let base = from; base < to; base += 2 * s1) single(re, im, base, s1, s1, c, s);
  }
}

/** High qubits are rotated in groups of up to this many per sweep of memory. */
const GROUP_QUBITS = 6;
/** Contiguous amplitudes per tile: a group's 2^k tiles (re and im) take 2^k * TILE * 16 bytes (256 KiB). */
const TILE = 256;

/**
 * RX on the k consecutive qubits q0..q0+k-1 in one sweep: for each tile of TILE contiguous amplitudes below
 * stride 2^q0, the 2^k tiles that differ only in those qubits are loaded into cache once and every rotation
 * of the group (two qubits per pass) is applied to them before the next tile: one pass over memory instead of k.
 */
function rotateGroup(re: Float64Array, im: Float64Array, q0: number, k: number, c: number, s: number): void {
  const size = re.length;
  const s0 = 2 ** q0;
  const span = s0 * 2 ** k;
  const members = 2 ** k;
  const tile = Math.min(TILE, s0);
  for (let hi = 0; hi < size; hi += span) {
    for (let lo = 0; lo < s0; lo += tile) {
      const origin = hi + lo;
      let j = 0;
      for (; j + 1 < k; j += 2) {
        const both = 3 << j;
        for (let i = 0; i < members; i++) {
          if (i & both) continue;
          double(re, im, origin + i * s0, tile, s0 << j, s0 << (j + 1), c, s);
        }
      }
      if (j < k) {
        const bit = 1 << j;
        for (let i = 0; i < members; i++) {
          if (i & bit) continue;
          single(re, im, origin + i * s0, tile, s0 << j, c, s);
        }
      }
    }
  }
}

/** exp(-i gamma C) on the amplitudes [from, to). */
function phaseRange(
  re: Float64Array,
  im: Float64Array,
  from: number,
  to: number,
  gamma: number,
  diag: Float64Array,
  table: { level: Uint16Array; cos: Float64Array; sin: Float64Array } | null,
): void {
  if (table) {
    const { level, cos, sin } = table;
    for (let k = from; k < to; k++) {
      const l = level[k]!;
      const c = cos[l]!;
      const s = sin[l]!;
      const r = re[k]!;
      const i = im[k]!;
      re[k] = r * c + i * s;
      im[k] = i * c - r * s;
    }
    return;
  }
  for (let k = from; k < to; k++) {
    const a = gamma * diag[k]!;
    const c = Math.cos(a);
    const s = Math.sin(a);
    const r = re[k]!;
    const i = im[k]!;
    re[k] = r * c + i * s;
    im[k] = i * c - r * s;
  }
}

/** cos and sin of gamma times each level: one pair per level instead of per amplitude. */
function levelTable(gamma: number, levels: CostLevels | null): { level: Uint16Array; cos: Float64Array; sin: Float64Array } | null {
  if (!levels) return null;
  const count = levels.values.length;
  const cos = new Float64Array(count);
  const sin = new Float64Array(count);
  for (let l = 0; l < count; l++) {
    cos[l] = Math.cos(gamma * levels.values[l]!);
    sin[l] = Math.sin(gamma * levels.values[l]!);
  }
  return { level: levels.level, cos, sin };
}

/**
 * The diagonal of the cost operator as a few distinct levels when it has them (a cut weight, a QUBO with
 * integer coefficients): the phase of a layer is then one cos/sin per level rather than per amplitude.
 */
export interface CostLevels {
  /** Index of each basis state's level. */
  level: Uint16Array;
  /** The value of each level. */
  values: Float64Array;
}

export function costLevels(diag: Float64Array): CostLevels | null {
  let min = Infinity;
  let max = -Infinity;
  for (let k = 0; k < diag.length; k++) {
    const v = diag[k]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  for (const scale of [1, 2, 4, 8]) {
    if ((max - min) * scale > 65_535) return null;
    const level = new Uint16Array(diag.length);
    let exact = true;
    for (let k = 0; k < diag.length; k++) {
      const l = (diag[k]! - min) * scale;
      const r = Math.round(l);
      if (Math.abs(l - r) > 1e-9) {
        exact = false;
        break;
      }
      level[k] = r;
    }
    if (!exact) continue;
    const count = Math.round((max - min) * scale) + 1;
    const values = new Float64Array(count);
    for (let l = 0; l < count; l++) values[l] = min + l / scale;
    return { level, values };
  }
  return null;
}

/**
 * An n-qubit state as two float64 arrays (real and imaginary parts), amplitude k for basis state k
 * (bit i of k is qubit i). Only the gates QAOA needs: a diagonal phase and the transverse-field mixer.
 */
export class StateVector {
  readonly size: number;
  readonly re: Float64Array;
  readonly im: Float64Array;

  constructor(readonly n: number) {
    if (!Number.isInteger(n) || n < 1 || n > MAX_QUBITS) throw new RangeError(`qubits must be 1..${MAX_QUBITS}`);
    this.size = 2 ** n;
    this.re = new Float64Array(this.size);
    this.im = new Float64Array(this.size);
  }

  /** |+>^n: every basis state with amplitude 1/sqrt(2^n). */
  resetPlus(): void {
    this.re.fill(1 / Math.sqrt(this.size));
    this.im.fill(0);
  }

  /** exp(-i gamma C) for the diagonal C. */
  applyPhase(gamma: number, diag: Float64Array, levels: CostLevels | null = null): void {
    phaseRange(this.re, this.im, 0, this.size, gamma, diag, levelTable(gamma, levels));
  }

  /** exp(-i beta sum_q X_q): RX(2 beta) on every qubit. */
  applyMixer(beta: number): void {
    this.layer(null, beta);
  }

  /**
   * One QAOA layer, exp(-i beta B) exp(-i gamma C), in 1 + ceil((n - 12) / 6) sweeps of memory: the phase and
   * the 12 low qubits' rotations per cache-sized block, then the high qubits in tiled groups of up to 6;
   * rotations go two qubits at a time, so each amplitude is loaded and stored once per pair of qubits.
   */
  applyLayer(gamma: number, beta: number, diag: Float64Array, levels: CostLevels | null = null): void {
    this.layer({ gamma, diag, table: levelTable(gamma, levels) }, beta);
  }

  private layer(phase: { gamma: number; diag: Float64Array; table: ReturnType<typeof levelTable> } | null, beta: number): void {
    const c = Math.cos(beta);
    const s = Math.sin(beta);
    const { n, re, im, size } = this;
    const low = Math.min(n, BLOCK_QUBITS);
    const block = 2 ** low;
    // Low qubits: the phase and every rotation applied to one cache-sized block before the next is touched.
    for (let start = 0; start < size; start += block) {
      if (phase) phaseRange(re, im, start, start + block, phase.gamma, phase.diag, phase.table);
      rotateBlock(re, im, low, start, start + block, c, s);
    }
    // High qubits in groups of balanced size, one sweep of memory per group.
    const high = n - low;
    const groups = Math.ceil(high / GROUP_QUBITS);
    let q = low;
    for (let g = 0; g < groups; g++) {
      const k = Math.ceil((n - q) / (groups - g));
      rotateGroup(re, im, q, k, c, s);
      q += k;
    }
  }

  /** sum_k |a_k|^2 */
  norm(): number {
    let total = 0;
    for (let k = 0; k < this.size; k++) total += this.re[k]! * this.re[k]! + this.im[k]! * this.im[k]!;
    return total;
  }

  /** <psi| C |psi> for the diagonal C. */
  expectation(diag: Float64Array): number {
    let total = 0;
    for (let k = 0; k < this.size; k++) total += (this.re[k]! * this.re[k]! + this.im[k]! * this.im[k]!) * diag[k]!;
    return total;
  }

  probability(k: number): number {
    return this.re[k]! * this.re[k]! + this.im[k]! * this.im[k]!;
  }

  /**
   * `shots` measurements in the computational basis (Born rule), as basis indices: uniforms are drawn,
   * sorted, and matched against the cumulative distribution in one pass (no 2^n-sized table).
   */
  sample(shots: number, rng: Random): Uint32Array {
    const u = new Float64Array(shots);
    for (let t = 0; t < shots; t++) u[t] = rng.next();
    u.sort();
    const out = new Uint32Array(shots);
    const total = this.norm();
    let cumulative = 0;
    let k = -1;
    for (let t = 0; t < shots; t++) {
      const target = u[t]! * total;
      while (cumulative <= target && k < this.size - 1) {
        k++;
        cumulative += this.probability(k);
      }
      out[t] = k;
    }
    // Sorted draws come out in basis order; shuffle them back into an order of measurement.
    for (let t = shots - 1; t > 0; t--) {
      const j = rng.int(t + 1);
      const v = out[t]!;
      out[t] = out[j]!;
      out[j] = v;
    }
    return out;
  }
}

/** One QAOA state: |gamma, beta> = prod_l exp(-i beta_l B) exp(-i gamma_l C) |+>^n. */
export function prepareQaoa(state: StateVector, diag: Float64Array, levels: CostLevels | null, gammas: readonly number[], betas: readonly number[]): void {
  state.resetPlus();
  for (let l = 0; l < gammas.length; l++) state.applyLayer(gammas[l]!, betas[l]!, diag, levels);
}
