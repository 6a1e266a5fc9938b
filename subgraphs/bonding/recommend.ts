import { RiskModel } from './correlation.js';

/**
 * Path recommendation for a redundant bond (the specification's "Bell-state" pair): the two paths whose
 * joint outage probability is lowest under the failure correlation of the common-shock model, among the
 * pairs that meet the constraints; plus traffic-split weights over every usable path and the expected
 * goodput.
 *
 * Exact search: paths that pass the per-path constraints are sorted by marginal outage p; pairs are
 * visited in that order and a pair is skipped only when p_i * p_j exceeds the best joint outage found
 * so far. That bound is safe because the paths' down indicators are positively associated (increasing
 * functions of independent shocks), so P(i, j down) >= p_i * p_j, and the joint outage is computed as
 * p_i p_j + P(i up) P(j up) (e^{-s} - 1) with s <= 0, which keeps the bound exact in floating point too.
 * The answer is the same as a brute-force scan of all n(n-1)/2 pairs (a test checks it on random instances).
 */

export interface CandidatePath {
  id: string;
  latencyMs: number;
  jitterMs: number;
  lossPct: number;
  capacityMbps: number;
  up: boolean;
  /** Probability that the path's own fault is present. */
  ownOutage: number;
  sharedRisk: readonly string[];
}

export interface Constraints {
  maxLatencyMs?: number | null | undefined;
  maxJitterMs?: number | null | undefined;
  maxLossPct?: number | null | undefined;
  minCombinedCapacityMbps?: number | null | undefined;
}

interface RuledOut {
  constraint: 'up' | 'maxLatencyMs' | 'maxJitterMs' | 'maxLossPct' | 'minCombinedCapacityMbps';
  limit: number | null;
  /** Paths (or, for minCombinedCapacityMbps, pairs) this constraint excluded. */
  count: number;
  /** Up to 20 of the excluded paths (pairs: "a+b"). */
  examples: string[];
}

interface PairChoice {
  a: string;
  b: string;
  jointOutage: number;
  availability: number;
  outageA: number;
  outageB: number;
  correlation: number;
  sharedRisk: string[];
  combinedCapacityMbps: number;
  /** The rate that survives either path failing: min of the two goodputs. */
  protectedRateMbps: number;
  /** Expected aggregate goodput of the two: sum of capacity x (1 - loss) x (1 - outage). */
  expectedGoodputMbps: number;
  maxLatencyMs: number;
}

interface PathWeight {
  pathId: string;
  weight: number;
  outage: number;
  expectedGoodputMbps: number;
}

export interface Recommendation {
  feasible: boolean;
  explanation: string;
  pair: PairChoice | null;
  runnerUp: PairChoice | null;
  weights: PathWeight[];
  expectedGoodputMbps: number;
  ruledOut: RuledOut[];
  pathsConsidered: number;
  pathsUsable: number;
  pairsTotal: number;
  pairsEvaluated: number;
}

const EXAMPLES = 20;

export function recommend(paths: readonly CandidatePath[], constraints: Constraints, groupOutage?: (name: string) => number): Recommendation {
  const model = new RiskModel(paths, groupOutage);
  const { ruledOut, usable } = applyPathConstraints(paths, constraints);
  const goodput = (i: number) => goodputOf(paths[i]!, model.outage(i));
  const totalGoodput = usable.reduce((s, i) => s + goodput(i), 0);
  const weights = usable.map((i) => ({
    pathId: paths[i]!.id,
    weight: totalGoodput > 0 ? goodput(i) / totalGoodput : 1 / usable.length,
    outage: model.outage(i),
    expectedGoodputMbps: goodput(i),
  }));

  const minCap = constraints.minCombinedCapacityMbps ?? null;
  const pairsTotal = (usable.length * (usable.length - 1)) / 2;
  const search = searchPairs(paths, model, usable, minCap);
  if (minCap !== null) {
    const short = countPairsBelow(
      usable.map((i) => paths[i]!.capacityMbps),
      minCap,
    );
    ruledOut.push({ constraint: 'minCombinedCapacityMbps', limit: minCap, count: short, examples: search.capacityExamples });
  }

  const pair = search.best && pairChoice(paths, model, search.best);
  const runnerUp = search.second && pairChoice(paths, model, search.second);
  return {
    feasible: pair !== null,
    explanation: explain(pair, runnerUp, ruledOut, paths.length, usable.length, minCap),
    pair,
    runnerUp,
    weights,
    expectedGoodputMbps: totalGoodput,
    ruledOut,
    pathsConsidered: paths.length,
    pathsUsable: usable.length,
    pairsTotal,
    pairsEvaluated: search.evaluated,
  };
}

/** Expected goodput of a path: its capacity, less its loss, while it is up. */
const goodputOf = (path: CandidatePath, outage: number) => path.capacityMbps * (1 - path.lossPct / 100) * (1 - outage);

/**
 * The per-path constraints: what each one rules out (listed when it was given; `up` always), and the
 * indexes of the paths that pass them all.
 */
function applyPathConstraints(paths: readonly CandidatePath[], c: Constraints): { ruledOut: RuledOut[]; usable: number[] } {
  const ruledOut: RuledOut[] = [];
  const rule = (constraint: RuledOut['constraint'], limit: number | null | undefined, fails: (p: CandidatePath) => boolean) => {
    const out = paths.filter(fails);
    if (limit !== undefined && (constraint === 'up' || limit !== null)) {
      ruledOut.push({ constraint, limit: limit ?? null, count: out.length, examples: out.slice(0, EXAMPLES).map((p) => p.id) });
    }
  };
  rule('up', null, (p) => !p.up);
  rule('maxLatencyMs', c.maxLatencyMs, (p) => c.maxLatencyMs != null && p.latencyMs > c.maxLatencyMs);
  rule('maxJitterMs', c.maxJitterMs, (p) => c.maxJitterMs != null && p.jitterMs > c.maxJitterMs);
  rule('maxLossPct', c.maxLossPct, (p) => c.maxLossPct != null && p.lossPct > c.maxLossPct);
  const usable: number[] = [];
  paths.forEach((p, i) => {
    if (!p.up) return;
    if (c.maxLatencyMs != null && p.latencyMs > c.maxLatencyMs) return;
    if (c.maxJitterMs != null && p.jitterMs > c.maxJitterMs) return;
    if (c.maxLossPct != null && p.lossPct > c.maxLossPct) return;
    usable.push(i);
  });
  return { ruledOut, usable };
}

/**
 * The exact search (see the top of this file): the best and second-best pairs of usable paths, the pairs
 * evaluated, and up to EXAMPLES pairs the combined-capacity constraint excluded.
 */
function searchPairs(
  paths: readonly CandidatePath[],
  model: RiskModel,
  usable: readonly number[],
  minCap: number | null,
): { best: [number, number] | null; second: [number, number] | null; evaluated: number; capacityExamples: string[] } {
  // Sorted by marginal outage (then id, so the visiting order never depends on the input order).
  const order = [...usable].sort((x, y) => model.outage(x) - model.outage(y) || compareIds(paths[x]!.id, paths[y]!.id));
  const p = order.map((i) => model.outage(i));
  const better = (joint: number, i: number, j: number, bestJoint: number, bestPair: [number, number]) =>
    comparePairs(paths, joint, i, j, bestJoint, bestPair[0], bestPair[1]) < 0;
  let best: [number, number] | null = null;
  let bestJoint = Number.POSITIVE_INFINITY;
  let second: [number, number] | null = null;
  let secondJoint = Number.POSITIVE_INFINITY;
  let evaluated = 0;
  const capacityExamples: string[] = [];
  for (let x = 0; x < order.length - 1; x++) {
    // Keep the runner-up exact as well: prune against the second best once there is one.
    if (p[x]! * p[x + 1]! > secondJoint) break;
    for (let y = x + 1; y < order.length; y++) {
      if (p[x]! * p[y]! > secondJoint) break;
      const i = order[x]!;
      const j = order[y]!;
      if (minCap !== null && paths[i]!.capacityMbps + paths[j]!.capacityMbps < minCap) {
        if (capacityExamples.length < EXAMPLES) capacityExamples.push(`${paths[i]!.id}+${paths[j]!.id}`);
        continue;
      }
      evaluated++;
      const joint = model.jointOutage(i, j);
      if (best === null || better(joint, i, j, bestJoint, best)) {
        second = best;
        secondJoint = bestJoint;
        best = [i, j];
        bestJoint = joint;
      } else if (second === null || better(joint, i, j, secondJoint, second)) {
        second = [i, j];
        secondJoint = joint;
      }
    }
  }
  return { best, second, evaluated, capacityExamples };
}

/** A pair as the recommendation states it, its paths in id order. */
function pairChoice(paths: readonly CandidatePath[], model: RiskModel, pair: [number, number]): PairChoice {
  const [i, j] = [...pair].sort((u, v) => compareIds(paths[u]!.id, paths[v]!.id)) as [number, number];
  const a = paths[i]!;
  const b = paths[j]!;
  const joint = model.jointOutage(i, j);
  return {
    a: a.id,
    b: b.id,
    jointOutage: joint,
    availability: 1 - joint,
    outageA: model.outage(i),
    outageB: model.outage(j),
    correlation: model.correlation(i, j),
    sharedRisk: model.sharedGroups(i, j),
    combinedCapacityMbps: a.capacityMbps + b.capacityMbps,
    protectedRateMbps: Math.min(a.capacityMbps * (1 - a.lossPct / 100), b.capacityMbps * (1 - b.lossPct / 100)),
    expectedGoodputMbps: goodputOf(a, model.outage(i)) + goodputOf(b, model.outage(j)),
    maxLatencyMs: Math.max(a.latencyMs, b.latencyMs),
  };
}

/**
 * Order of pairs: lower joint outage; then more combined capacity; then the lower worse latency; then
 * the ids (so equal pairs always resolve the same way).
 */
function comparePairs(paths: readonly CandidatePath[], jointA: number, a1: number, a2: number, jointB: number, b1: number, b2: number): number {
  if (jointA !== jointB) return jointA < jointB ? -1 : 1;
  const capA = paths[a1]!.capacityMbps + paths[a2]!.capacityMbps;
  const capB = paths[b1]!.capacityMbps + paths[b2]!.capacityMbps;
  if (capA !== capB) return capA > capB ? -1 : 1;
  const latA = Math.max(paths[a1]!.latencyMs, paths[a2]!.latencyMs);
  const latB = Math.max(paths[b1]!.latencyMs, paths[b2]!.latencyMs);
  if (latA !== latB) return latA < latB ? -1 : 1;
  return compareIds(pairKey(paths, a1, a2), pairKey(paths, b1, b2));
}

const pairKey = (paths: readonly CandidatePath[], i: number, j: number) => [paths[i]!.id, paths[j]!.id].sort(compareIds).join('\u0000');

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Pairs whose capacities sum below `min` (two pointers over the sorted capacities). */
function countPairsBelow(capacities: number[], min: number): number {
  const s = [...capacities].sort((a, b) => a - b);
  let count = 0;
  for (let lo = 0, hi = s.length - 1; lo < hi;) {
    if (s[lo]! + s[hi]! < min) {
      count += hi - lo;
      lo++;
    } else hi--;
  }
  return count;
}

const sci = (x: number) => (x === 0 ? '0' : x.toExponential(2));

function explain(pair: PairChoice | null, runnerUp: PairChoice | null, ruledOut: RuledOut[], total: number, usable: number, minCap: number | null): string {
  const excluded = ruledOut
    .filter((r) => r.count > 0 && r.constraint !== 'minCombinedCapacityMbps')
    .map((r) => `${r.count} ${r.constraint === 'up' ? 'down' : `over ${r.constraint} ${r.limit}`}`);
  const filterText = excluded.length > 0 ? `${usable} of ${total} paths usable (${excluded.join(', ')})` : `${usable} of ${total} paths usable`;
  if (!pair) {
    if (usable < 2) return `No feasible pair: ${filterText}; a redundant bond needs two.`;
    return `No feasible pair: ${filterText}, but no two of them reach ${minCap} Mbit/s of combined capacity.`;
  }
  const shared = pair.sharedRisk.length > 0 ? `sharing ${pair.sharedRisk.join(', ')}` : 'no shared infrastructure';
  let text =
    `${pair.a} + ${pair.b}: both down with probability ${sci(pair.jointOutage)} (alone ${sci(pair.outageA)} and ${sci(pair.outageB)}; ` +
    `failure correlation ${pair.correlation.toFixed(3)}, ${shared}); ${filterText}.`;
  if (runnerUp) text += ` Next best: ${runnerUp.a} + ${runnerUp.b} at ${sci(runnerUp.jointOutage)}.`;
  return text;
}
