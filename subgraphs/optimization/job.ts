import { bruteForce, branchAndBound } from './exact.js';
import { randomRestarts, refineStarts } from './local-search.js';
import { approximationRatio, bitString, bitsOf, objectiveDiagonal, type IsingProblem } from './problem.js';
import { optimizeQaoa } from './qaoa.js';
import { Random } from '../../platform/random.js';
import { BACKEND, costLevels, prepareQaoa, StateVector, type CostLevels } from './statevector.js';

export interface JobOptions {
  depth: number;
  shots: number;
  seed: number;
  /** Circuit evaluations the angle optimizer may spend. */
  maxEvaluations: number;
  /** Distinct best samples handed to local search. */
  refineTop: number;
}

export interface SampleSummary {
  bits: string;
  count: number;
  value: number;
}

/** Everything a run records, in plain numbers (it crosses the worker boundary as a structured clone). */
export interface JobResult {
  backend: string;
  qubits: number;
  depth: number;
  shots: number;
  gammas: number[];
  betas: number[];
  /** <F> at the optimized angles: the expected energy. */
  expectedValue: number;
  expectedRatio: number;
  /** <F> at the fixed starting angles, before the optimizer. */
  startRatio: number;
  evaluations: number;
  /** Mean F over the shots. */
  sampledMean: number;
  sampledMeanRatio: number;
  bestSample: SampleSummary;
  bestSampleRatio: number;
  /** Probability of measuring an optimal assignment at the optimized angles. */
  optimumProbability: number;
  distinctSamples: number;
  topSamples: SampleSummary[];
  /** Best of as many uniformly random assignments as there were shots: what sampling alone gives. */
  randomSampleBestRatio: number;
  refined: { bits: string; value: number; ratio: number; starts: number; evaluations: number };
  baseline: { value: number; ratio: number; starts: number; evaluations: number };
  optimum: { value: number; worst: number; bits: string; method: string; nodes: number; bruteForceAgrees: boolean };
  timings: { diagonalMs: number; optimizeMs: number; simulateMs: number; sampleMs: number; exactMs: number; refineMs: number; totalMs: number };
}

/**
 * One hybrid run: the exact optimum (branch and bound, checked against the brute-force table), QAOA angles
 * optimized on the state-vector simulator, `shots` measurements, local search from the best distinct
 * samples, and a random-start local search given the same number of move evaluations.
 */
export function runJob(problem: IsingProblem, options: JobOptions): JobResult {
  const t0 = performance.now();
  const diag = objectiveDiagonal(problem);
  const diagonalMs = performance.now() - t0;

  let t = performance.now();
  const table = bruteForce(problem, diag);
  const bb = branchAndBound(problem, 'max');
  const exactMs = performance.now() - t;
  const max = bb.max;
  const min = table.min;
  const ratio = (v: number) => approximationRatio(v, min, max);

  t = performance.now();
  const state = new StateVector(problem.n);
  const levels = costLevels(diag);
  const opt = optimizeQaoa(problem, diag, options.depth, options.maxEvaluations, state, levels);
  const optimizeMs = performance.now() - t;

  t = performance.now();
  const { optimumProbability, distinct, sum } = measureShots(diag, state, levels, opt, options.shots, new Random(options.seed, 'qaoa-shots'), max);
  const randomBest = bestOfRandomSamples(diag, options.shots, new Random(options.seed, 'random-shots'));
  const sampleMs = performance.now() - t;
  const summary = (e: DistinctSample): SampleSummary => ({
    bits: bitString(bitsOf(e.k, problem.n)),
    count: e.count,
    value: e.value,
  });

  t = performance.now();
  const starts = distinct.slice(0, Math.max(1, options.refineTop)).map((e) => bitsOf(e.k, problem.n));
  const refined = refineStarts(problem, starts);
  const baseline = randomRestarts(problem, refined.evaluations, new Random(options.seed, 'random-restarts'));
  const refineMs = performance.now() - t;

  const best = distinct[0]!;
  return {
    backend: BACKEND.name,
    qubits: problem.n,
    depth: options.depth,
    shots: options.shots,
    gammas: opt.gammas,
    betas: opt.betas,
    expectedValue: opt.expectedValue,
    expectedRatio: ratio(opt.expectedValue),
    startRatio: ratio(opt.startValue),
    evaluations: opt.evaluations,
    sampledMean: sum / options.shots,
    sampledMeanRatio: ratio(sum / options.shots),
    bestSample: summary(best),
    bestSampleRatio: ratio(best.value),
    optimumProbability,
    distinctSamples: distinct.length,
    topSamples: distinct.slice(0, 10).map(summary),
    randomSampleBestRatio: ratio(randomBest),
    refined: {
      bits: bitString(refined.best.bits),
      value: refined.best.value,
      ratio: ratio(refined.best.value),
      starts: refined.starts,
      evaluations: refined.evaluations,
    },
    baseline: { value: baseline.best.value, ratio: ratio(baseline.best.value), starts: baseline.starts, evaluations: baseline.evaluations },
    optimum: {
      value: max,
      worst: min,
      bits: bitString(bitsOf(bb.argmax, problem.n)),
      method: bb.method,
      nodes: bb.work,
      bruteForceAgrees: table.max === bb.max,
    },
    timings: { diagonalMs, optimizeMs, simulateMs: opt.simulateMs, sampleMs, exactMs, refineMs, totalMs: performance.now() - t0 },
  };
}

/** An assignment the shots measured (its index in the diagonal), how often, and its objective. */
interface DistinctSample {
  k: number;
  count: number;
  value: number;
}

/**
 * The state at the optimized angles, measured: the probability of an optimal assignment, the `shots`
 * samples' distinct assignments (best first, then the most frequent, then by index) and their objective sum.
 */
function measureShots(
  diag: Float64Array,
  state: StateVector,
  levels: CostLevels | null,
  opt: { gammas: number[]; betas: number[] },
  shotCount: number,
  rng: Random,
  max: number,
): { optimumProbability: number; distinct: DistinctSample[]; sum: number } {
  prepareQaoa(state, diag, levels, opt.gammas, opt.betas);
  let optimumProbability = 0;
  for (let k = 0; k < diag.length; k++) if (diag[k] === max) optimumProbability += state.probability(k);
  const shots = state.sample(shotCount, rng);
  const counts = new Map<number, number>();
  let sum = 0;
  for (const k of shots) {
    counts.set(k, (counts.get(k) ?? 0) + 1);
    sum += diag[k]!;
  }
  const distinct = [...counts].map(([k, count]) => ({ k, count, value: diag[k]! })).sort((a, b) => b.value - a.value || b.count - a.count || a.k - b.k);
  return { optimumProbability, distinct, sum };
}

/** The best of `shots` uniformly random assignments: what sampling alone gives. */
function bestOfRandomSamples(diag: Float64Array, shots: number, random: Random): number {
  let randomBest = -Infinity;
  for (let s = 0; s < shots; s++) randomBest = Math.max(randomBest, diag[Math.floor(random.next() * diag.length)]!);
  return randomBest;
}
