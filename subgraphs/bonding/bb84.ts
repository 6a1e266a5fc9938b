import { randomBytes } from 'node:crypto';
import { cascade, type Uint32Source } from './cascade.js';
import { toeplitzHash } from './toeplitz.js';

/**
 * A BB84 simulation in software (no quantum hardware is involved or implied): Alice sends random bits in
 * random bases (rectilinear or diagonal), an optional intercept-resend eavesdropper measures a share of
 * the qubits in random bases and resends what she saw, the channel flips Bob's outcome with probability
 * `noise`, and Bob measures in random bases. Then the classical post-processing a real link runs:
 *
 * 1. sifting: bases are compared publicly, positions with different bases dropped (about half);
 * 2. estimation: a random sample of the sifted key is disclosed; its error rate Q and an upper bound Q_U
 *    that holds with probability 1 - EPSILON_PE for the undisclosed bits (Serfling's inequality for
 *    sampling without replacement); abort when Q_U > 11%;
 * 3. error correction by Cascade, every disclosed parity counted, then a 64-bit Toeplitz verification
 *    tag compared (64 more bits leaked); a mismatch aborts;
 * 4. privacy amplification by Toeplitz hashing to the secure length
 *    l = m (1 - h(Q_U)) - leaked - 2 log2(1 / EPSILON_PA)   (m undisclosed bits, h binary entropy),
 *    of which the caller's `bits` are taken; when l falls short, the run is repeated with more qubits.
 */

export const QBER_ABORT_THRESHOLD = 0.11;
/** Failure probability of the QBER bound. */
export const EPSILON_PE = 1e-9;
/** Distance from a uniform key allowed by privacy amplification. */
export const EPSILON_PA = 1e-10;
const VERIFY_TAG_BITS = 64;
const MIN_SAMPLE = 10_000;
const MAX_QUBITS = 1 << 22;
const MAX_ATTEMPTS = 4;

export interface Bb84Options {
  /** Final key length wanted. */
  bits: number;
  /** Probability that the channel flips a qubit's outcome (0 .. 0.5). */
  noise: number;
  /** Share of qubits an intercept-resend eavesdropper measures and resends (0: none). */
  interceptFraction: number;
  rng: Uint32Source;
}

export interface Bb84Result {
  status: 'completed' | 'aborted';
  reason: string;
  attempts: number;
  rawBits: number;
  siftedBits: number;
  sampleBits: number;
  sampleErrors: number;
  qber: number;
  qberUpperBound: number;
  errorsCorrected: number;
  /** Parity bits disclosed by Cascade plus the verification tag. */
  leakedBits: number;
  /** Secure length the undisclosed bits allowed. */
  secureBits: number;
  finalBits: number;
  /** Errors left between Alice's and Bob's keys after error correction (known only to a simulation). */
  residualErrors: number;
  eavesdropperDetected: boolean;
  /** The final BB84 key (finalBits bits, packed big-endian into bytes), null when aborted. */
  key: Uint8Array | null;
}

/** Random 32-bit words from node:crypto (the default source: key bits must not come from a seeded PRNG). */
export class CryptoSource implements Uint32Source {
  private buffer = randomBytes(0);
  private offset = 0;
  uint32(): number {
    if (this.offset + 4 > this.buffer.length) {
      this.buffer = randomBytes(65_536);
      this.offset = 0;
    }
    const v = this.buffer.readUInt32LE(this.offset);
    this.offset += 4;
    return v;
  }
}

export function binaryEntropy(p: number): number {
  if (p <= 0 || p >= 1) return 0;
  return -p * Math.log2(p) - (1 - p) * Math.log2(1 - p);
}

/** Upper bound on the error rate of the m undisclosed bits, given e errors in a sample of k out of N = k + m. */
export function qberUpperBound(errors: number, k: number, m: number): number {
  if (k === 0 || m === 0) return 1;
  const total = k + m;
  const t = Math.sqrt((Math.log(1 / EPSILON_PE) * (1 - (k - 1) / total)) / (2 * k));
  return Math.min(1, errors / k + (total / m) * t);
}

interface Planned {
  qubits: number;
}

function plan(bits: number, assumedQber: number, leakPerBit: number): Planned | null {
  const bound = Math.min(0.5, assumedQber + 0.05);
  const rate = 1 - binaryEntropy(bound) - leakPerBit;
  if (rate <= 0.01) return null;
  const m = Math.ceil((bits + 2 * Math.log2(1 / EPSILON_PA) + VERIFY_TAG_BITS + 64) / rate);
  const k = Math.max(MIN_SAMPLE, Math.ceil(m / 3));
  return { qubits: Math.ceil(2.1 * (m + k)) };
}

export function runBb84(options: Bb84Options): Bb84Result {
  const { bits, noise, interceptFraction, rng } = options;
  let planned = plan(bits, 0.03, 1.2 * binaryEntropy(0.03));
  let last: Bb84Result | null = null;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS && planned; attempt++) {
    const qubits = Math.min(MAX_QUBITS, planned.qubits);
    const result = attemptOnce(qubits, bits, noise, interceptFraction, rng, attempt);
    last = result.result;
    if (result.result.status === 'completed' || !result.retry) return result.result;
    if (qubits >= MAX_QUBITS) break;
    planned = plan(bits, result.result.qber, result.leakPerBit);
    if (planned) planned.qubits = Math.max(planned.qubits, Math.ceil(qubits * 1.5));
  }
  if (!last) {
    return emptyAbort('the planned qubit budget is exhausted');
  }
  return { ...last, reason: last.reason || 'not enough secret key after error correction within the qubit budget' };
}

function emptyAbort(reason: string): Bb84Result {
  return {
    status: 'aborted', reason, attempts: 0, rawBits: 0, siftedBits: 0, sampleBits: 0, sampleErrors: 0, qber: 0,
    qberUpperBound: 1, errorsCorrected: 0, leakedBits: 0, secureBits: 0, finalBits: 0, residualErrors: 0,
    eavesdropperDetected: false, key: null,
  };
}

function attemptOnce(
  qubits: number,
  bits: number,
  noise: number,
  interceptFraction: number,
  rng: Uint32Source,
  attempt: number,
): { result: Bb84Result; retry: boolean; leakPerBit: number } {
  const noiseLimit = Math.floor(noise * 4294967296);
  const eveLimit = Math.floor(interceptFraction * 4294967296);
  const alice = new Uint8Array(qubits);
  const bob = new Uint8Array(qubits);
  const sifted: number[] = [];
  let word = 0;
  let left = 0;
  const bit = () => {
    if (left === 0) {
      word = rng.uint32();
      left = 32;
    }
    left--;
    const b = word & 1;
    word >>>= 1;
    return b;
  };
  for (let i = 0; i < qubits; i++) {
    const a = bit();
    const aliceBasis = bit();
    // The photon as it travels: value and basis it was prepared in.
    let value = a;
    let basis = aliceBasis;
    if (eveLimit > 0 && rng.uint32() < eveLimit) {
      const eveBasis = bit();
      value = eveBasis === basis ? value : bit();
      basis = eveBasis;
    }
    const bobBasis = bit();
    let outcome = bobBasis === basis ? value : bit();
    if (noiseLimit > 0 && rng.uint32() < noiseLimit) outcome ^= 1;
    alice[i] = a;
    bob[i] = outcome;
    if (bobBasis === aliceBasis) sifted.push(i);
  }
  const siftedBits = sifted.length;
  // Disclose a random sample (a partial Fisher-Yates shuffle picks it).
  const k = Math.min(Math.floor(siftedBits / 2), Math.max(MIN_SAMPLE, Math.ceil(siftedBits / 4)));
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor((rng.uint32() / 4294967296) * (siftedBits - i));
    const t = sifted[i]!;
    sifted[i] = sifted[j]!;
    sifted[j] = t;
  }
  let sampleErrors = 0;
  for (let i = 0; i < k; i++) sampleErrors += alice[sifted[i]!]! ^ bob[sifted[i]!]!;
  const m = siftedBits - k;
  const qber = k > 0 ? sampleErrors / k : 0;
  const bound = qberUpperBound(sampleErrors, k, m);
  const base: Bb84Result = {
    status: 'aborted', reason: '', attempts: attempt, rawBits: qubits, siftedBits, sampleBits: k, sampleErrors, qber,
    qberUpperBound: bound, errorsCorrected: 0, leakedBits: 0, secureBits: 0, finalBits: 0, residualErrors: 0,
    eavesdropperDetected: false, key: null,
  };
  if (bound > QBER_ABORT_THRESHOLD) {
    return {
      result: {
        ...base,
        eavesdropperDetected: true,
        reason: `QBER ${(qber * 100).toFixed(2)}% (upper bound ${(bound * 100).toFixed(2)}%) exceeds the ${QBER_ABORT_THRESHOLD * 100}% threshold: ` +
          'the channel may be observed (an intercept-resend attack on every qubit gives 25%); no key was made',
      },
      retry: false,
      leakPerBit: 0,
    };
  }
  // The undisclosed sifted bits, in their (random) order.
  const keyA = new Uint8Array(m);
  const keyB = new Uint8Array(m);
  for (let i = 0; i < m; i++) {
    keyA[i] = alice[sifted[k + i]!]!;
    keyB[i] = bob[sifted[k + i]!]!;
  }
  const ec = cascade(keyA, keyB, Math.max(qber, 0.005), rng);
  // Verification: a 64-bit Toeplitz tag of each side's key, compared in public.
  const tagSeed = randomBits(rng, m + VERIFY_TAG_BITS - 1);
  const tagA = toeplitzHash(tagSeed, keyA, VERIFY_TAG_BITS);
  const tagB = toeplitzHash(tagSeed, ec.corrected, VERIFY_TAG_BITS);
  let residualErrors = 0;
  for (let i = 0; i < m; i++) residualErrors += keyA[i]! ^ ec.corrected[i]!;
  const leakedBits = ec.leakedBits + VERIFY_TAG_BITS;
  const secureBits = Math.max(0, Math.floor(m * (1 - binaryEntropy(bound)) - leakedBits - 2 * Math.log2(1 / EPSILON_PA)));
  const withEc = { ...base, errorsCorrected: ec.flips, leakedBits, secureBits, residualErrors };
  if (!tagA.every((b, i) => b === tagB[i])) {
    return { result: { ...withEc, reason: 'error correction left errors (verification tags differ); no key was made' }, retry: true, leakPerBit: leakedBits / m };
  }
  if (secureBits < bits) {
    return {
      result: { ...withEc, reason: `only ${secureBits} secure bits after error correction and the finite-size bound, ${bits} asked` },
      retry: true,
      leakPerBit: leakedBits / m,
    };
  }
  const paSeed = randomBits(rng, m + bits - 1);
  const finalKey = toeplitzHash(paSeed, keyA, bits);
  return {
    result: { ...withEc, status: 'completed', reason: 'key distilled', finalBits: bits, key: packBits(finalKey) },
    retry: false,
    leakPerBit: leakedBits / m,
  };
}

function randomBits(rng: Uint32Source, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 32) {
    const w = rng.uint32();
    for (let b = 0; b < 32 && i + b < n; b++) out[i + b] = (w >>> b) & 1;
  }
  return out;
}

/** 0/1 bits to bytes, most significant bit first; a last partial byte is zero-padded. */
export function packBits(bits: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) if (bits[i]) out[i >>> 3]! |= 0x80 >>> (i & 7);
  return out;
}
