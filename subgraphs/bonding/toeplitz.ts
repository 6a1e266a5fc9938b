/**
 * Toeplitz hashing over GF(2), the privacy-amplification step of QKD: y = T x with T an l x n Toeplitz
 * matrix, T[i][j] = seed[i - j + n - 1], defined by a public random seed of n + l - 1 bits. Bits are
 * 0/1 bytes at the interface. Two implementations that must agree (tests check both against the plain
 * matrix product):
 *
 * - word-parallel: row i of T is a window of the seed; with 32 pre-shifted copies of the seed every row
 *   is 32-bit ANDs and XORs, l * n / 32 word operations;
 * - FFT: y_i is the parity of the (i + n - 1)-th coefficient of the integer convolution seed * x, computed
 *   by one complex FFT of both real sequences at once and one inverse, O((n + l) log(n + l)); for
 *   megabit blocks. Double precision is exact here (coefficients are integers below n, far under 2^52,
 *   and rounding errors stay near 1e-9), and a few outputs are re-checked directly anyway.
 */

export function toeplitzPlain(seed: Uint8Array, x: Uint8Array, outBits: number): Uint8Array {
  const n = x.length;
  checkSizes(seed, n, outBits);
  const y = new Uint8Array(outBits);
  for (let i = 0; i < outBits; i++) {
    let s = 0;
    for (let j = 0; j < n; j++) s ^= seed[i - j + n - 1]! & x[j]!;
    y[i] = s;
  }
  return y;
}

export function toeplitzHash(seed: Uint8Array, x: Uint8Array, outBits: number): Uint8Array {
  const n = x.length;
  return n * outBits > 1 << 24 ? toeplitzFft(seed, x, outBits) : toeplitzWords(seed, x, outBits);
}

export function toeplitzWords(seed: Uint8Array, x: Uint8Array, outBits: number): Uint8Array {
  const n = x.length;
  checkSizes(seed, n, outBits);
  // y_i = sum_j seed[i + j'] * xr[j'] with xr[j'] = x[n - 1 - j']: row i is the seed window starting at i.
  const words = (n + 31) >>> 5;
  const xr = new Uint32Array(words);
  for (let j = 0; j < n; j++) if (x[n - 1 - j]) xr[j >>> 5]! |= 1 << (j & 31);
  const seedWords = (seed.length + 31 + 32) >>> 5;
  const packed = new Uint32Array(seedWords + 1);
  for (let k = 0; k < seed.length; k++) if (seed[k]) packed[k >>> 5]! |= 1 << (k & 31);
  // shifted[s][q] = bits 32q + s .. 32q + s + 31 of the seed.
  const shifted: Uint32Array[] = [];
  for (let s = 0; s < 32; s++) {
    const w = new Uint32Array(seedWords);
    for (let q = 0; q < seedWords; q++) {
      w[q] = s === 0 ? packed[q]! : ((packed[q]! >>> s) | (packed[q + 1]! << (32 - s))) >>> 0;
    }
    shifted.push(w);
  }
  const y = new Uint8Array(outBits);
  const lastMask = n % 32 === 0 ? 0xffffffff : (1 << (n % 32)) - 1;
  for (let i = 0; i < outBits; i++) {
    const row = shifted[i & 31]!;
    const base = i >>> 5;
    let acc = 0;
    for (let q = 0; q < words - 1; q++) acc ^= row[base + q]! & xr[q]!;
    acc ^= row[base + words - 1]! & xr[words - 1]! & lastMask;
    y[i] = parity32(acc);
  }
  return y;
}

export function toeplitzFft(seed: Uint8Array, x: Uint8Array, outBits: number): Uint8Array {
  const n = x.length;
  checkSizes(seed, n, outBits);
  // A circular convolution of size N >= n + l - 1 leaves coefficients n - 1 .. n + l - 2 unaliased.
  let size = 1;
  while (size < n + outBits - 1) size <<= 1;
  const re = new Float64Array(size);
  const im = new Float64Array(size);
  for (let k = 0; k < seed.length; k++) re[k] = seed[k]!;
  for (let j = 0; j < n; j++) im[j] = x[j]!;
  const tw = twiddles(size);
  fft(re, im, tw, false);
  // Separate the two real spectra (A = FFT(seed), B = FFT(x)) and multiply: A_k B_k.
  const pr = new Float64Array(size);
  const pi = new Float64Array(size);
  for (let k = 0; k < size; k++) {
    const k2 = (size - k) & (size - 1);
    const zr = re[k]!;
    const zi = im[k]!;
    const cr = re[k2]!;
    const ci = -im[k2]!;
    const ar = (zr + cr) / 2;
    const ai = (zi + ci) / 2;
    // B = (Z - conj(Z[N-k])) / (2i)
    const br = (zi - ci) / 2;
    const bi = -(zr - cr) / 2;
    pr[k] = ar * br - ai * bi;
    pi[k] = ar * bi + ai * br;
  }
  fft(pr, pi, tw, true);
  const y = new Uint8Array(outBits);
  for (let i = 0; i < outBits; i++) {
    const v = Math.round(pr[i + n - 1]! / size);
    y[i] = v & 1;
  }
  // Spot checks against the definition: a precision fault would show here, never pass silently.
  for (let c = 0; c < 8 && outBits > 0; c++) {
    const i = Math.floor(((c * 2654435761) >>> 0) % outBits);
    let s = 0;
    for (let j = 0; j < n; j++) s ^= seed[i - j + n - 1]! & x[j]!;
    if (s !== y[i]) throw new Error(`Toeplitz FFT precision check failed at output ${i}`);
  }
  return y;
}

function checkSizes(seed: Uint8Array, n: number, outBits: number): void {
  if (outBits < 0 || n < 1) throw new RangeError('Toeplitz hashing needs a non-empty input');
  if (seed.length !== n + outBits - 1) throw new RangeError(`Toeplitz seed must have n + l - 1 = ${n + outBits - 1} bits, has ${seed.length}`);
}

function parity32(v: number): number {
  v ^= v >>> 16;
  v ^= v >>> 8;
  v ^= v >>> 4;
  v ^= v >>> 2;
  v ^= v >>> 1;
  return v & 1;
}

interface FftPlan {
  /** Bit-reversal permutation of 0 .. size - 1. */
  reversed: Int32Array;
  /** Per stage (len = 4, 8, ...): cos and sin of 2 pi k / len for k < len / 2, contiguous. */
  stages: { cos: Float64Array; sin: Float64Array }[];
}

const planCache = new Map<number, FftPlan>();

function twiddles(size: number): FftPlan {
  let plan = planCache.get(size);
  if (!plan) {
    const bits = Math.round(Math.log2(size));
    const reversed = new Int32Array(size);
    for (let i = 1; i < size; i++) reversed[i] = (reversed[i >> 1]! >> 1) | ((i & 1) << (bits - 1));
    const stages: FftPlan['stages'] = [];
    for (let len = 4; len <= size; len <<= 1) {
      const half = len >> 1;
      const cos = new Float64Array(half);
      const sin = new Float64Array(half);
      for (let k = 0; k < half; k++) {
        cos[k] = Math.cos((2 * Math.PI * k) / len);
        sin[k] = Math.sin((2 * Math.PI * k) / len);
      }
      stages.push({ cos, sin });
    }
    plan = { reversed, stages };
    if (planCache.size > 8) planCache.clear();
    planCache.set(size, plan);
  }
  return plan;
}

/** In-place iterative radix-2 FFT (inverse without the 1/N scale). */
function fft(re: Float64Array, im: Float64Array, plan: FftPlan, inverse: boolean): void {
  const n = re.length;
  const rev = plan.reversed;
  for (let i = 1; i < n; i++) {
    const j = rev[i]!;
    if (i < j) {
      let t = re[i]!;
      re[i] = re[j]!;
      re[j] = t;
      t = im[i]!;
      im[i] = im[j]!;
      im[j] = t;
    }
  }
  // len = 2: the twiddle is 1.
  for (let a = 0; a < n; a += 2) {
    const xr = re[a + 1]!;
    const xi = im[a + 1]!;
    re[a + 1] = re[a]! - xr;
    im[a + 1] = im[a]! - xi;
    re[a] = re[a]! + xr;
    im[a] = im[a]! + xi;
  }
  const sign = inverse ? 1 : -1;
  let stage = 0;
  for (let len = 4; len <= n; len <<= 1, stage++) {
    const half = len >> 1;
    const { cos, sin } = plan.stages[stage]!;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < half; k++) {
        const wr = cos[k]!;
        const wi = sign * sin[k]!;
        const a = i + k;
        const b = a + half;
        const br = re[b]!;
        const bi = im[b]!;
        const xr = br * wr - bi * wi;
        const xi = br * wi + bi * wr;
        const ar = re[a]!;
        const ai = im[a]!;
        re[b] = ar - xr;
        im[b] = ai - xi;
        re[a] = ar + xr;
        im[a] = ai + xi;
      }
    }
  }
}
