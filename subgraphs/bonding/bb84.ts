import { randomBytes } from 'node:crypto';
import { cascade, type Uint32Source } from './cascade.js';
import { toeplitzHash } from './toeplitz.js';

/**
 * A BB84 simulation in software (no quantum hardware is involved or implied): Alice sends random bits in
 * random bases (rectilinear or diagonal), an optional intercept-resend eavesdropper measures a share of
 * the qubits in random bases and resends what she saw, the channel flips Bob's outcome with probability
 * `noise`, and Bob measures in random bases. Then the classical post-processing a real link runs:
 *
 * 0. a pilot block (PILOT_QUBITS, sifted and disclosed whole) estimates the channel's QBER; the block is then
 *    sized for it (`planBlock`): the sample k and the undisclosed m are the smallest pair whose bound stays
 *    under 11% and whose secure length reaches the bits asked, at the estimate's upper end, all within
 *    RAW_QUBIT_BUDGET raw qubits counting the pilot and every retry. A measured QBER over 11% aborts as a
 *    channel that may be observed; a channel under it whose block would not fit the budget aborts saying so
 *    (sample too small for this noise, and the block it would need);
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
const EPSILON_PE = 1e-9;
/** Distance from a uniform key allowed by privacy amplification. */
const EPSILON_PA = 1e-10;
const VERIFY_TAG_BITS = 64;
/** Raw qubits one key request may send in all: the pilot, and every attempt. */
export const RAW_QUBIT_BUDGET = 1 << 22;
/** Raw qubits of the pilot (about 8,192 sifted bits: the QBER to about +-0.25 points at 5%). */
const PILOT_QUBITS = 16_384;
const MAX_ATTEMPTS = 4;
/** Cascade's disclosed parities per corrected bit, as a multiple of the Shannon limit h(Q), before one is measured. */
const CASCADE_EFFICIENCY = 1.25;
/** Standard deviations of margin on the QBER estimate and on the sample's own error count. */
const MARGIN_SD = 3;

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
function qberUpperBound(errors: number, k: number, m: number): number {
  if (k === 0 || m === 0) return 1;
  const total = k + m;
  const t = Math.sqrt((Math.log(1 / EPSILON_PE) * (1 - (k - 1) / total)) / (2 * k));
  return Math.min(1, errors / k + (total / m) * t);
}

/** A block: k sifted bits disclosed for the estimate, m kept for the key; raw qubits to send for it. */
export interface BlockPlan {
  sample: number;
  kept: number;
  qubits: number;
  /** The bound and the secure length the plan expects at the planning QBER. */
  expectedBound: number;
  expectedSecureBits: number;
}

const secureLength = (m: number, bound: number, leakPerBit: number) =>
  Math.floor(m * (1 - binaryEntropy(bound)) - m * leakPerBit - VERIFY_TAG_BITS - 2 * Math.log2(1 / EPSILON_PA));

/**
 * The smallest block (k + m sifted bits) for `bits` of key on a channel whose QBER is at most `qber`: the
 * sample's error rate may come out MARGIN_SD deviations above it, and the bound on the kept bits must stay
 * under the threshold with the secure length still at least `bits`. Searched over k on a geometric grid,
 * with the least m for each k found by bisection (the bound falls and the secure length grows with m).
 * Null when no block of at most `maxQubits` raw qubits does.
 */
export function planBlock(bits: number, qber: number, leakPerBit: number, maxQubits: number): BlockPlan | null {
  let best: BlockPlan | null = null;
  const maxSifted = Math.floor(maxQubits / 2.1);
  for (let k = 256; k <= maxSifted; k = Math.ceil(k * 1.08)) {
    const sampleRate = Math.min(0.5, qber + MARGIN_SD * Math.sqrt((Math.max(qber, 1e-4) * (1 - qber)) / k));
    const boundAt = (m: number) => qberUpperBound(sampleRate * k, k, m);
    const fits = (m: number) => boundAt(m) <= QBER_ABORT_THRESHOLD && secureLength(m, boundAt(m), leakPerBit) >= bits;
    if (!fits(maxSifted - k)) continue;
    let lo = 1;
    let hi = maxSifted - k;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (fits(mid)) hi = mid;
      else lo = mid + 1;
    }
    const qubits = Math.ceil(2.1 * (k + lo));
    if (qubits <= maxQubits && (!best || qubits < best.qubits)) {
      best = { sample: k, kept: lo, qubits, expectedBound: boundAt(lo), expectedSecureBits: secureLength(lo, boundAt(lo), leakPerBit) };
    }
  }
  return best;
}

/** What the smallest block for `bits` would be with no budget at all (for the answer that says it does not fit). */
function blockWithoutBudget(bits: number, qber: number, leakPerBit: number): BlockPlan | null {
  return planBlock(bits, qber, leakPerBit, 1 << 30);
}

export function runBb84(options: Bb84Options): Bb84Result {
  const { bits, noise, interceptFraction, rng } = options;
  // The pilot: sifted and disclosed whole, for the QBER estimate the block is sized from.
  const pilot = exchange(PILOT_QUBITS, noise, interceptFraction, rng);
  let pilotErrors = 0;
  for (const i of pilot.sifted) pilotErrors += pilot.alice[i]! ^ pilot.bob[i]!;
  const pilotBits = pilot.sifted.length;
  const estimate = pilotBits > 0 ? pilotErrors / pilotBits : 0;
  let spent = PILOT_QUBITS;
  const pilotOnly = (reason: string, eavesdropperDetected: boolean): Bb84Result => ({
    ...emptyAbort(reason),
    rawBits: PILOT_QUBITS,
    siftedBits: pilotBits,
    sampleBits: pilotBits,
    sampleErrors: pilotErrors,
    qber: estimate,
    qberUpperBound: Math.min(1, estimate + MARGIN_SD * Math.sqrt((estimate * (1 - estimate)) / Math.max(pilotBits, 1))),
    eavesdropperDetected,
  });
  // A measured error rate over the threshold is the channel itself: no block size helps.
  if (estimate > QBER_ABORT_THRESHOLD) {
    return pilotOnly(
      `QBER ${(estimate * 100).toFixed(2)}% measured on a ${pilotBits}-bit pilot exceeds the ${QBER_ABORT_THRESHOLD * 100}% threshold: ` +
        'the channel may be observed (an intercept-resend attack on every qubit gives 25%); no key was made',
      true,
    );
  }
  let planningQber = Math.min(0.5, estimate + MARGIN_SD * Math.sqrt((Math.max(estimate, 1e-4) * (1 - estimate)) / Math.max(pilotBits, 1)));
  let leakPerBit = CASCADE_EFFICIENCY * binaryEntropy(Math.max(planningQber, 0.005));
  let last: Bb84Result | null = null;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const plan = planBlock(bits, planningQber, leakPerBit, RAW_QUBIT_BUDGET - spent);
    if (!plan) {
      const wanted = blockWithoutBudget(bits, planningQber, leakPerBit);
      const need = wanted
        ? `a block of about ${wanted.qubits.toLocaleString('en')} raw qubits (${wanted.sample.toLocaleString('en')} sampled, ${wanted.kept.toLocaleString('en')} kept)`
        : 'more raw qubits than any block can give';
      const reason =
        `sample too small for this noise: at a QBER of ${(estimate * 100).toFixed(2)}% (planned at up to ${(planningQber * 100).toFixed(2)}%) a bound under ${QBER_ABORT_THRESHOLD * 100}% ` +
        `and ${bits} secure bits need ${need}; ${(RAW_QUBIT_BUDGET - spent).toLocaleString('en')} of the ${RAW_QUBIT_BUDGET.toLocaleString('en')}-qubit budget are left; no key was made`;
      return last ? { ...last, status: 'aborted', reason, key: null, finalBits: 0 } : pilotOnly(reason, false);
    }
    spent += plan.qubits;
    const result = attemptOnce(plan, bits, noise, interceptFraction, rng, attempt);
    last = result.result;
    if (result.result.status === 'completed' || !result.retry) return result.result;
    // Plan the next block from what this one measured.
    planningQber = Math.max(
      planningQber,
      Math.min(0.5, result.result.qber + MARGIN_SD * Math.sqrt((result.result.qber * (1 - result.result.qber)) / Math.max(result.result.sampleBits, 1))),
    );
    leakPerBit = Math.max(leakPerBit, result.leakPerBit);
  }
  return last ?? emptyAbort('no attempt could be made');
}

function emptyAbort(reason: string): Bb84Result {
  return {
    status: 'aborted',
    reason,
    attempts: 0,
    rawBits: 0,
    siftedBits: 0,
    sampleBits: 0,
    sampleErrors: 0,
    qber: 0,
    qberUpperBound: 1,
    errorsCorrected: 0,
    leakedBits: 0,
    secureBits: 0,
    finalBits: 0,
    residualErrors: 0,
    eavesdropperDetected: false,
    key: null,
  };
}

/** Sends `qubits` through the channel: Alice's bits, Bob's outcomes, and the positions where their bases agreed. */
function exchange(qubits: number, noise: number, interceptFraction: number, rng: Uint32Source): { alice: Uint8Array; bob: Uint8Array; sifted: number[] } {
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
  return { alice, bob, sifted };
}

/** One block's attempt, and whether a larger block (or one planned from what this one measured) may succeed. */
interface Attempt {
  result: Bb84Result;
  retry: boolean;
  /** Bits error correction and verification disclosed per kept bit (0 when the block stopped before them). */
  leakPerBit: number;
}

function attemptOnce(plan: BlockPlan, bits: number, noise: number, interceptFraction: number, rng: Uint32Source, attempt: number): Attempt {
  const qubits = plan.qubits;
  const { alice, bob, sifted } = exchange(qubits, noise, interceptFraction, rng);
  const sample = discloseSample(alice, bob, sifted, plan, rng);
  const { k, sampleErrors, qber, bound } = sample;
  const base: Bb84Result = {
    status: 'aborted',
    reason: '',
    attempts: attempt,
    rawBits: qubits,
    siftedBits: sifted.length,
    sampleBits: k,
    sampleErrors,
    qber,
    qberUpperBound: bound,
    errorsCorrected: 0,
    leakedBits: 0,
    secureBits: 0,
    finalBits: 0,
    residualErrors: 0,
    eavesdropperDetected: false,
    key: null,
  };
  const refused = refusedBySample(base);
  if (refused) return refused;
  const { keyA, keyB } = keptBits(alice, bob, sifted, k);
  const reconciled = reconcile(keyA, keyB, sample, rng);
  const { leakedBits, secureBits } = reconciled;
  const withEc = { ...base, errorsCorrected: reconciled.errorsCorrected, leakedBits, secureBits, residualErrors: reconciled.residualErrors };
  const leakPerBit = leakedBits / keyA.length;
  if (!reconciled.verified) {
    return { result: { ...withEc, reason: 'error correction left errors (verification tags differ); no key was made' }, retry: true, leakPerBit };
  }
  if (secureBits < bits) {
    return {
      result: { ...withEc, reason: `only ${secureBits} secure bits after error correction and the finite-size bound, ${bits} asked` },
      retry: true,
      leakPerBit,
    };
  }
  // Privacy amplification: a Toeplitz hash of Alice's kept bits down to the key length.
  const paSeed = randomBits(rng, keyA.length + bits - 1);
  const finalKey = toeplitzHash(paSeed, keyA, bits);
  return { result: { ...withEc, status: 'completed', reason: 'key distilled', finalBits: bits, key: packBits(finalKey) }, retry: false, leakPerBit };
}

/** What a block's disclosed sample measured: its size `k`, its errors, the QBER, and the bound that QBER puts on the kept bits. */
interface SampleMeasure {
  k: number;
  sampleErrors: number;
  qber: number;
  bound: number;
}

/**
 * Discloses a random sample of the sifted bits, the plan's share of them: a partial Fisher-Yates shuffle
 * moves the `k` sampled positions to the front of `sifted`, and the rest (in their random order) are kept.
 */
function discloseSample(alice: Uint8Array, bob: Uint8Array, sifted: number[], plan: BlockPlan, rng: Uint32Source): SampleMeasure {
  const siftedBits = sifted.length;
  const k = Math.min(Math.floor(siftedBits / 2), Math.round((siftedBits * plan.sample) / (plan.sample + plan.kept)));
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor((rng.uint32() / 4294967296) * (siftedBits - i));
    const t = sifted[i]!;
    sifted[i] = sifted[j]!;
    sifted[j] = t;
  }
  let sampleErrors = 0;
  for (let i = 0; i < k; i++) sampleErrors += alice[sifted[i]!]! ^ bob[sifted[i]!]!;
  const qber = k > 0 ? sampleErrors / k : 0;
  return { k, sampleErrors, qber, bound: qberUpperBound(sampleErrors, k, siftedBits - k) };
}

/**
 * A block its sample already decides: a measured QBER over the threshold is an observed channel (no
 * retry), a bound over it with the rate under it is a sample too small (a larger block can do); null when
 * the block goes on to error correction.
 */
function refusedBySample(base: Bb84Result): Attempt | null {
  const { qber, qberUpperBound: bound, sampleBits: k } = base;
  if (qber > QBER_ABORT_THRESHOLD) {
    return {
      result: {
        ...base,
        eavesdropperDetected: true,
        reason:
          `QBER ${(qber * 100).toFixed(2)}% (upper bound ${(bound * 100).toFixed(2)}%) exceeds the ${QBER_ABORT_THRESHOLD * 100}% threshold: ` +
          'the channel may be observed (an intercept-resend attack on every qubit gives 25%); no key was made',
      },
      retry: false,
      leakPerBit: 0,
    };
  }
  if (bound > QBER_ABORT_THRESHOLD) {
    // The measured rate is under the threshold but this sample cannot bound it there: a larger block can.
    return {
      result: {
        ...base,
        reason: `sample too small for this noise: QBER ${(qber * 100).toFixed(2)}% on ${k} sampled bits bounds the kept bits only at ${(bound * 100).toFixed(2)}%, over the ${QBER_ABORT_THRESHOLD * 100}% threshold; no key was made`,
      },
      retry: true,
      leakPerBit: 0,
    };
  }
  return null;
}

/** The undisclosed sifted bits of each side, in their (random) order after the `k` sampled ones. */
function keptBits(alice: Uint8Array, bob: Uint8Array, sifted: readonly number[], k: number): { keyA: Uint8Array; keyB: Uint8Array } {
  const m = sifted.length - k;
  const keyA = new Uint8Array(m);
  const keyB = new Uint8Array(m);
  for (let i = 0; i < m; i++) {
    keyA[i] = alice[sifted[k + i]!]!;
    keyB[i] = bob[sifted[k + i]!]!;
  }
  return { keyA, keyB };
}

/**
 * Error correction (Cascade) of Bob's kept bits against Alice's, then verification: a 64-bit Toeplitz tag of
 * each side's key, compared in public. The secure length is what the finite-size bound leaves after every
 * disclosed bit and the privacy amplification's margin.
 */
function reconcile(
  keyA: Uint8Array,
  keyB: Uint8Array,
  sample: SampleMeasure,
  rng: Uint32Source,
): { errorsCorrected: number; leakedBits: number; secureBits: number; residualErrors: number; verified: boolean } {
  const m = keyA.length;
  const ec = cascade(keyA, keyB, Math.max(sample.qber, 0.005), rng);
  const tagSeed = randomBits(rng, m + VERIFY_TAG_BITS - 1);
  const tagA = toeplitzHash(tagSeed, keyA, VERIFY_TAG_BITS);
  const tagB = toeplitzHash(tagSeed, ec.corrected, VERIFY_TAG_BITS);
  let residualErrors = 0;
  for (let i = 0; i < m; i++) residualErrors += keyA[i]! ^ ec.corrected[i]!;
  const leakedBits = ec.leakedBits + VERIFY_TAG_BITS;
  const secureBits = Math.max(0, Math.floor(m * (1 - binaryEntropy(sample.bound)) - leakedBits - 2 * Math.log2(1 / EPSILON_PA)));
  return { errorsCorrected: ec.flips, leakedBits, secureBits, residualErrors, verified: tagA.every((b, i) => b === tagB[i]) };
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
function packBits(bits: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) if (bits[i]) out[i >>> 3]! |= 0x80 >>> (i & 7);
  return out;
}
