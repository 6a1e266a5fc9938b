import { argv } from 'node:process';
import { bruteForce } from '../subgraphs/optimization/exact.js';
import { generateFleet, positionAt } from '../subgraphs/optimization/fleet.js';
import { random3Regular } from '../subgraphs/optimization/graphs.js';
import { runJob } from '../subgraphs/optimization/job.js';
import { randomRestarts } from '../subgraphs/optimization/local-search.js';
import { maxCutProblem, objectiveDiagonal } from '../subgraphs/optimization/problem.js';
import { Random } from '../platform/random.js';
import { costLevels, StateVector } from '../subgraphs/optimization/statevector.js';
import { loadZ3, plainCheck, verifyFleet } from '../subgraphs/optimization/verify.js';
import { median } from './support/stats.js';

/**
 * `npm run bench -- optimization [--max-qubits 24]`: the simulator's time per QAOA layer by qubit count
 * beside a textbook implementation (one memory sweep per qubit, cos/sin per amplitude); full QAOA runs
 * beside the random-start local search given the same move budget and random sampling given the same
 * shots; Z3 verification of 1,000 vessels beside the plain all-pairs check. One process, one run.
 */

const flag = (name: string, fallback: number) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] ? Number(argv[i + 1]) : fallback;
};

const fmt = (x: number, d = 1) => x.toFixed(d);

/** The textbook layer: cos/sin per amplitude, then one full sweep per qubit. */
function plainLayer(re: Float64Array, im: Float64Array, n: number, diag: Float64Array, gamma: number, beta: number): void {
  const size = re.length;
  for (let k = 0; k < size; k++) {
    const c = Math.cos(gamma * diag[k]!);
    const s = Math.sin(gamma * diag[k]!);
    const r = re[k]!;
    const i = im[k]!;
    re[k] = r * c + i * s;
    im[k] = i * c - r * s;
  }
  const c = Math.cos(beta);
  const s = Math.sin(beta);
  for (let q = 0; q < n; q++) {
    const stride = 2 ** q;
    for (let a = 0; a < size; a++) {
      if (a & stride) continue;
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
}

function layers(maxQubits: number): void {
  console.log('\nOne QAOA layer (phase + mixer) on 3-regular MaxCut, median ms');
  console.log('qubits | amplitudes | simulator | textbook | speed-up | <C> agrees');
  for (const n of [12, 16, 20, 22, 24].filter((q) => q <= maxQubits)) {
    const p = maxCutProblem(n, random3Regular(n, 1));
    const diag = objectiveDiagonal(p);
    const levels = costLevels(diag);
    const state = new StateVector(n);
    const reps = n <= 16 ? 9 : n <= 20 ? 5 : 3;
    const fast: number[] = [];
    const slow: number[] = [];
    let agree = true;
    for (let r = 0; r < reps; r++) {
      state.resetPlus();
      let t = performance.now();
      state.applyLayer(0.6, 0.39, diag, levels);
      fast.push(performance.now() - t);
      const a = state.expectation(diag);
      state.resetPlus();
      const re = state.re;
      const im = state.im;
      t = performance.now();
      plainLayer(re, im, n, diag, 0.6, 0.39);
      slow.push(performance.now() - t);
      agree &&= Math.abs(state.expectation(diag) - a) < 1e-9;
    }
    console.log(
      `${String(n).padStart(6)} | ${String(2 ** n).padStart(10)} | ${fmt(median(fast)).padStart(9)} | ${fmt(median(slow)).padStart(8)} | ${fmt(median(slow) / median(fast), 2).padStart(8)} | ${agree}`,
    );
  }
}

/** What the optimizer adds to the fixed starting angles on small graphs, where short cycles change the landscape. */
function fixedAngles(): void {
  console.log('\nFixed starting angles vs optimized, 3-regular MaxCut at 16 vertices, seeds 1-5: expected cut / optimum');
  for (const depth of [1, 2]) {
    const starts: number[] = [];
    const optimized: number[] = [];
    for (let seed = 1; seed <= 5; seed++) {
      const r = runJob(maxCutProblem(16, random3Regular(16, seed)), { depth, shots: 64, seed, maxEvaluations: depth === 1 ? 40 : 60, refineTop: 1 });
      starts.push(r.startRatio);
      optimized.push(r.expectedRatio);
    }
    const span = (xs: number[]) => `${fmt(Math.min(...xs), 3)}-${fmt(Math.max(...xs), 3)}`;
    console.log(`p = ${depth}: fixed angles ${span(starts)}, optimized ${span(optimized)}`);
  }
}

function qaoaVersusBaseline(): void {
  console.log('\nQAOA (state-vector simulator) vs classical baselines, 3-regular MaxCut; ratios against the exact optimum');
  console.log('n  | p | evals | expected | best of shots | random best of shots | refined | random-start LS (same budget) | run ms');
  for (const [n, depth] of [
    [10, 1],
    [10, 2],
    [14, 1],
    [14, 2],
    [16, 2],
  ] as const) {
    const p = maxCutProblem(n, random3Regular(n, 7));
    const r = runJob(p, { depth, shots: 256, seed: 7, maxEvaluations: depth === 1 ? 40 : 60, refineTop: 4 });
    console.log(
      `${String(n).padEnd(2)} | ${depth} | ${String(r.evaluations).padStart(5)} | ${fmt(r.expectedRatio, 4).padStart(8)} | ${fmt(r.bestSampleRatio, 4).padStart(13)} | ${fmt(r.randomSampleBestRatio, 4).padStart(20)} | ${fmt(r.refined.ratio, 4).padStart(7)} | ${(fmt(r.baseline.ratio, 4) + ` (${r.baseline.starts} starts, ${r.baseline.evaluations} moves)`).padStart(29)} | ${fmt(r.timings.totalMs, 0)}`,
    );
  }
  // A weak budget shows the difference local search alone cannot hide: one start each.
  console.log('\nOne local search each (budget of one start): from the best QAOA sample vs from one random assignment, 20 instances of n = 16');
  let fromQaoa = 0;
  let fromRandom = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const p = maxCutProblem(16, random3Regular(16, 100 + seed));
    const r = runJob(p, { depth: 1, shots: 64, seed, maxEvaluations: 20, refineTop: 1 });
    const diag = objectiveDiagonal(p);
    const best = bruteForce(p, diag);
    fromQaoa += r.refined.ratio;
    fromRandom += randomRestarts(p, r.refined.evaluations, new Random(seed)).best.value / best.max;
  }
  console.log(`mean ratio: refined QAOA sample ${fmt(fromQaoa / 20, 4)}, random-start local search with the same move budget ${fmt(fromRandom / 20, 4)}`);
}

async function verification(): Promise<void> {
  console.log('\nZ3 verification vs the plain all-pairs check');
  console.log('vessels | pairs | solver pairs | violations | z3 ms (queries) | plain ms | agree');
  let t = performance.now();
  await loadZ3();
  console.log(`(Z3 WebAssembly loaded once in ${fmt(performance.now() - t, 0)} ms)`);
  for (const size of [100, 1000]) {
    const fleet = generateFleet(5, size).map((s) => positionAt(s, new Date('2026-11-23T12:00:00Z')));
    t = performance.now();
    const v = await verifyFleet(fleet, 463);
    const z3ms = performance.now() - t;
    t = performance.now();
    const plain = plainCheck(fleet, 463);
    const plainMs = performance.now() - t;
    console.log(
      `${String(size).padStart(7)} | ${String(v.pairs).padStart(6)} | ${String(v.solverPairs).padStart(12)} | ${String(v.crossCheck.separationViolations + v.crossCheck.speedViolations).padStart(10)} | ${(fmt(z3ms, 0) + ' (' + v.solver.queries.map((q) => `${q.result} ${q.ms}`).join(', ') + ')').padStart(15)} | ${fmt(plainMs, 1).padStart(8)} | ${v.crossCheck.agrees && plain.separation.length === v.crossCheck.separationViolations}`,
    );
  }
}

export default async function bench(): Promise<void> {
  const maxQubits = flag('--max-qubits', 24);
  console.log(`optimization bench (node ${process.version}, one core per measurement; machine load ${(await import('node:os')).loadavg()[0]!.toFixed(1)})`);
  layers(maxQubits);
  fixedAngles();
  qaoaVersusBaseline();
  await verification();
}
