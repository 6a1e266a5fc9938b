import { describe, expect, it } from 'vitest';
import { bruteForce, branchAndBound, exactRange } from '../../../subgraphs/optimization/exact.js';
import { generateFleet, positionAt, SPEED_ZONES } from '../../../subgraphs/optimization/fleet.js';
import { haversineM, LocalPlane } from '../../../subgraphs/optimization/geo.js';
import { random3Regular } from '../../../subgraphs/optimization/graphs.js';
import { berthInstance, convoyInstance } from '../../../subgraphs/optimization/instances.js';
import { runJob } from '../../../subgraphs/optimization/job.js';
import { adjacencyOf, localSearch, randomRestarts } from '../../../subgraphs/optimization/local-search.js';
import { nelderMead } from '../../../subgraphs/optimization/nelder-mead.js';
import {
  bitsOf,
  maxCutProblem,
  objectiveDiagonal,
  objectiveOf,
  objectiveOfBits,
  quboProblem,
  type IsingProblem,
} from '../../../subgraphs/optimization/problem.js';
import { optimizeQaoa } from '../../../subgraphs/optimization/qaoa.js';
import { Random } from '../../../platform/random.js';
import { costLevels, prepareQaoa, StateVector } from '../../../subgraphs/optimization/statevector.js';

const edge = maxCutProblem(2, [{ u: 0, v: 1, w: 1 }]);

function randomProblem(n: number, seed: number): IsingProblem {
  const rng = new Random(seed, 'test');
  const h = Array.from({ length: n }, () => (rng.next() < 0.5 ? 0 : Math.round(rng.range(-3, 3))));
  const couplings = [];
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (rng.next() < 0.4) couplings.push({ i, j, w: Math.round(rng.range(-4, 4)) || 1 });
  return { n, offset: rng.range(-2, 2), h, couplings };
}

describe('state-vector simulator: cases computed by hand', () => {
  it('one edge: <C> = 1/2 + sin(4 beta) sin(gamma) / 2, and 1 (the cut for sure) at gamma = pi/2, beta = pi/8', () => {
    const diag = objectiveDiagonal(edge);
    expect([...diag]).toEqual([0, 1, 1, 0]);
    const s = new StateVector(2);
    for (const [g, b] of [
      [0.3, 0.2],
      [1.1, -0.4],
      [2.5, 0.7],
      [Math.PI / 2, Math.PI / 8],
    ] as const) {
      prepareQaoa(s, diag, null, [g], [b]);
      expect(s.expectation(diag)).toBeCloseTo(0.5 + 0.5 * Math.sin(4 * b) * Math.sin(g), 12);
    }
    prepareQaoa(s, diag, null, [Math.PI / 2], [Math.PI / 8]);
    expect(s.probability(0b01) + s.probability(0b10)).toBeCloseTo(1, 12);
  });

  it('|+>^n is normalized and gives <C> = |E| / 2; gamma = 0 leaves it there for any beta', () => {
    const edges = random3Regular(10, 4);
    const p = maxCutProblem(10, edges);
    const diag = objectiveDiagonal(p);
    const s = new StateVector(10);
    s.resetPlus();
    expect(s.norm()).toBeCloseTo(1, 14);
    expect(s.expectation(diag)).toBeCloseTo(edges.length / 2, 12);
    prepareQaoa(s, diag, costLevels(diag), [0], [0.77]);
    expect(s.expectation(diag)).toBeCloseTo(edges.length / 2, 12);
  });

  it('stays normalized through layers, and the level-table phase equals the direct one', () => {
    const p = maxCutProblem(
      13,
      random3Regular(12, 9)
        .map((e) => ({ ...e, w: 2 }))
        .concat([{ u: 11, v: 12, w: 3 }]),
    );
    const diag = objectiveDiagonal(p);
    const a = new StateVector(13);
    const b = new StateVector(13);
    prepareQaoa(a, diag, costLevels(diag), [0.3, 0.7, 0.2], [0.5, 0.1, 0.9]);
    prepareQaoa(b, diag, null, [0.3, 0.7, 0.2], [0.5, 0.1, 0.9]);
    expect(a.norm()).toBeCloseTo(1, 12);
    let diff = 0;
    for (let k = 0; k < a.size; k++) diff = Math.max(diff, Math.abs(a.re[k]! - b.re[k]!), Math.abs(a.im[k]! - b.im[k]!));
    expect(diff).toBeLessThan(1e-12);
  });

  // 15 qubits: one high group of 3 (tile 256 < stride); 19: groups of 4 and 3; 20: 4 and 4 (tiles of the
  // group's stride 4,096); a fused layer must equal the phase followed by the mixer.
  it.each([15, 19, 20])('the tiled mixer on %i qubits equals RX applied qubit by qubit, and a fused layer equals phase then mixer', (n) => {
    const s = new StateVector(n);
    const rng = new Random(3);
    for (let k = 0; k < s.size; k++) {
      s.re[k] = rng.range(-1, 1);
      s.im[k] = rng.range(-1, 1);
    }
    const re = Float64Array.from(s.re);
    const im = Float64Array.from(s.im);
    const beta = 0.37;
    const c = Math.cos(beta);
    const si = Math.sin(beta);
    for (let q = 0; q < n; q++) {
      const stride = 2 ** q;
      for (let a = 0; a < s.size; a++) {
        if (a & stride) continue;
        const b = a + stride;
        const [ar, ai, br, bi] = [re[a]!, im[a]!, re[b]!, im[b]!];
        re[a] = c * ar + si * bi;
        im[a] = c * ai - si * br;
        re[b] = c * br + si * ai;
        im[b] = c * bi - si * ar;
      }
    }
    const start = { re: Float64Array.from(s.re), im: Float64Array.from(s.im) };
    s.applyMixer(beta);
    let diff = 0;
    for (let k = 0; k < s.size; k++) diff = Math.max(diff, Math.abs(s.re[k]! - re[k]!), Math.abs(s.im[k]! - im[k]!));
    expect(diff).toBeLessThan(1e-12);

    const diag = objectiveDiagonal(maxCutProblem(n, random3Regular(n % 2 === 0 ? n : n - 1, 5)));
    for (const levels of [costLevels(diag), null]) {
      const fused = new StateVector(n);
      fused.re.set(start.re);
      fused.im.set(start.im);
      fused.applyLayer(0.8, beta, diag, levels);
      s.re.set(start.re);
      s.im.set(start.im);
      s.applyPhase(0.8, diag, levels);
      s.applyMixer(beta);
      diff = 0;
      for (let k = 0; k < s.size; k++) diff = Math.max(diff, Math.abs(s.re[k]! - fused.re[k]!), Math.abs(s.im[k]! - fused.im[k]!));
      expect(diff).toBeLessThan(1e-12);
    }
  });

  it('shots follow the Born rule (chi-square over the 4 outcomes of a 2-qubit state)', () => {
    const diag = objectiveDiagonal(edge);
    const s = new StateVector(2);
    prepareQaoa(s, diag, null, [0.9], [0.3]);
    const shots = 40_000;
    const counts = [0, 0, 0, 0];
    for (const k of s.sample(shots, new Random(1))) counts[k]!++;
    let chi2 = 0;
    for (let k = 0; k < 4; k++) {
      const expected = shots * s.probability(k);
      chi2 += (counts[k]! - expected) ** 2 / expected;
    }
    // 3 degrees of freedom: P(chi2 > 16.3) = 0.001.
    expect(chi2).toBeLessThan(16.3);
  });
});

describe('problems in Ising form', () => {
  it('the diagonal equals F of every assignment, for random problems with fields and couplings', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const p = randomProblem(9, seed);
      const diag = objectiveDiagonal(p);
      for (let k = 0; k < diag.length; k++) {
        expect(diag[k]).toBeCloseTo(objectiveOf(p, k), 9);
        if (k % 37 === 0) expect(objectiveOfBits(p, bitsOf(k, 9))).toBeCloseTo(diag[k]!, 9);
      }
    }
  });

  it('a QUBO maps exactly: F(x) = -f(x) for every x', () => {
    const linear = [3, -2, 1, 0];
    const quadratic = [
      { u: 0, v: 1, w: 4 },
      { u: 1, v: 3, w: -5 },
      { u: 2, v: 3, w: 2 },
    ];
    const p = quboProblem(4, linear, quadratic, 7);
    for (let k = 0; k < 16; k++) {
      const x = bitsOf(k, 4);
      let f = 7;
      linear.forEach((q, i) => (f += q * x[i]!));
      for (const e of quadratic) f += e.w * x[e.u]! * x[e.v]!;
      expect(objectiveOf(p, k)).toBeCloseTo(-f, 12);
    }
  });

  it('random 3-regular graphs are simple and 3-regular', () => {
    for (const n of [4, 8, 12, 20]) {
      const edges = random3Regular(n, n);
      expect(edges).toHaveLength((3 * n) / 2);
      const degree = new Array<number>(n).fill(0);
      const seen = new Set<string>();
      for (const e of edges) {
        expect(e.u).not.toBe(e.v);
        seen.add(`${e.u}-${e.v}`);
        degree[e.u]!++;
        degree[e.v]!++;
      }
      expect(seen.size).toBe(edges.length);
      expect(degree.every((d) => d === 3)).toBe(true);
    }
  });
});

describe('exact optimum', () => {
  it('branch and bound equals brute force (max and min) on 40 random instances', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const p = randomProblem(4 + (seed % 11), seed);
      const table = bruteForce(p);
      const bb = exactRange(p);
      expect(bb.max).toBeCloseTo(table.max, 9);
      expect(bb.min).toBeCloseTo(table.min, 9);
      expect(objectiveOf(p, bb.argmax)).toBeCloseTo(table.max, 9);
    }
  });

  it('branch and bound prunes: far fewer nodes than 2^n on a 22-vertex 3-regular MaxCut', () => {
    const p = maxCutProblem(22, random3Regular(22, 1));
    const bb = branchAndBound(p);
    expect(bb.work).toBeLessThan(2 ** 22 / 4);
    expect(bb.max).toBeGreaterThanOrEqual(Math.ceil(33 * 0.8));
  });
});

describe('QAOA on 3-regular MaxCut reaches the proven bounds', () => {
  // Expected cut / maximum cut at the optimized angles against the bounds for QAOA on 3-regular graphs,
  // 0.6924 (p = 1) and 0.7559 (p = 2).
  for (const n of [8, 10, 12]) {
    for (const seed of [1, 2]) {
      it(`n = ${n}, seed ${seed}`, () => {
        const p = maxCutProblem(n, random3Regular(n, seed));
        const diag = objectiveDiagonal(p);
        const opt = bruteForce(p, diag).max;
        const p1 = optimizeQaoa(p, diag, 1, 40);
        const p2 = optimizeQaoa(p, diag, 2, 60);
        expect(p1.expectedValue / opt).toBeGreaterThanOrEqual(0.6924);
        expect(p2.expectedValue / opt).toBeGreaterThanOrEqual(0.7559);
        // Depth helps, and the optimizer never loses ground on its start.
        expect(p2.expectedValue).toBeGreaterThan(p1.expectedValue);
        expect(p1.expectedValue).toBeGreaterThanOrEqual(p1.startValue);
      });
    }
  }
});

describe('Nelder-Mead', () => {
  it('finds the minimum of a shifted quadratic within its budget', () => {
    const r = nelderMead((x) => (x[0]! - 1.5) ** 2 + 3 * (x[1]! + 0.5) ** 2, [0, 0], { maxEvaluations: 200, tolerance: 1e-12 });
    expect(r.x[0]).toBeCloseTo(1.5, 3);
    expect(r.x[1]).toBeCloseTo(-0.5, 3);
    expect(r.evaluations).toBeLessThanOrEqual(200);
  });
});

describe('local search and the baseline', () => {
  it('ends at a one-flip optimum (no single flip improves) and never below its start', () => {
    const p = randomProblem(14, 8);
    const adjacency = adjacencyOf(p);
    const rng = new Random(2);
    for (let t = 0; t < 20; t++) {
      const start = Uint8Array.from({ length: 14 }, () => (rng.next() < 0.5 ? 1 : 0));
      const r = localSearch(p, adjacency, start);
      expect(r.value).toBeCloseTo(objectiveOfBits(p, r.bits), 9);
      expect(r.value).toBeGreaterThanOrEqual(objectiveOfBits(p, start) - 1e-9);
      for (let i = 0; i < 14; i++) {
        const flipped = Uint8Array.from(r.bits);
        flipped[i] = flipped[i] ? 0 : 1;
        expect(objectiveOfBits(p, flipped)).toBeLessThanOrEqual(r.value + 1e-9);
      }
    }
  });

  it('the random-start baseline spends exactly the budget it is given', () => {
    const p = maxCutProblem(16, random3Regular(16, 5));
    const r = randomRestarts(p, 500, new Random(1));
    expect(r.evaluations).toBe(500);
    expect(r.starts).toBeGreaterThan(1);
  });

  it('a full job records the ratios side by side, with the baseline on the refinement budget', () => {
    const p = maxCutProblem(12, random3Regular(12, 3));
    const r = runJob(p, { depth: 1, shots: 512, seed: 4, maxEvaluations: 30, refineTop: 4 });
    expect(r.backend).toBe('statevector-simulator');
    expect(r.optimum.bruteForceAgrees).toBe(true);
    expect(r.expectedRatio).toBeGreaterThanOrEqual(0.6924);
    expect(r.bestSampleRatio).toBeGreaterThanOrEqual(r.expectedRatio - 1e-9);
    expect(r.refined.ratio).toBeGreaterThanOrEqual(r.bestSampleRatio);
    expect(r.baseline.evaluations).toBe(r.refined.evaluations);
    expect(Math.abs(r.sampledMeanRatio - r.expectedRatio)).toBeLessThan(0.05);
    expect(r.topSamples.reduce((s, x) => s + x.count, 0)).toBeLessThanOrEqual(512);
  });
});

describe('fleet and instances', () => {
  const at = new Date('2026-11-23T12:00:00Z');
  const fleet = generateFleet(7, 40);

  it('vessels have distinct 9-digit MMSIs; the same seed gives the same fleet', () => {
    expect(new Set(fleet.map((v) => v.mmsi)).size).toBe(40);
    for (const v of fleet) expect(v.mmsi).toMatch(/^\d{9}$/);
    expect(generateFleet(7, 40)).toEqual(fleet);
    expect(generateFleet(8, 40)).not.toEqual(fleet);
  });

  it('tracks are plausible: a vessel moves at its speed over ground, and keeps zone limits', () => {
    for (const spec of fleet.slice(0, 10)) {
      const a = positionAt(spec, at);
      const b = positionAt(spec, new Date(at.getTime() + 60_000));
      const metres = haversineM(a, b);
      // One minute at sog knots, give or take a turn at a waypoint or a lane end.
      expect(metres).toBeLessThanOrEqual((Math.max(a.sog, b.sog) * 1852) / 60 + 1);
      expect(a.cog).toBeGreaterThanOrEqual(0);
      expect(a.cog).toBeLessThan(360);
    }
    const plane = new LocalPlane(SPEED_ZONES[0]!.center);
    for (const spec of fleet) {
      const p = positionAt(spec, at);
      for (const z of SPEED_ZONES) {
        const q = plane.project(p);
        const c = plane.project(z.center);
        if (Math.hypot(q.x - c.x, q.y - c.y) < z.radiusM * 0.99) expect(p.sog).toBeLessThan(z.limitKnots);
      }
    }
  });

  it('the convoy instance connects every vessel; the berth QUBO optimum is a feasible assignment', () => {
    const positions = fleet.map((s) => positionAt(s, at));
    const convoy = convoyInstance(positions, 10);
    const degree = new Array<number>(10).fill(0);
    for (const e of convoy.edges) {
      degree[e.u]!++;
      degree[e.v]!++;
    }
    expect(degree.every((d) => d >= 2)).toBe(true);
    const berth = berthInstance(positions, 3);
    expect(berth.problem.n).toBe(9);
    const best = bruteForce(berth.problem);
    const x = bitsOf(best.argmax, 9);
    for (let v = 0; v < 3; v++) expect(x[v * 3]! + x[v * 3 + 1]! + x[v * 3 + 2]!).toBe(1);
    for (let k = 0; k < 3; k++) expect(x[k]! + x[3 + k]! + x[6 + k]!).toBe(1);
  });
});
