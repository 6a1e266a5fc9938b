import type { Bool, CheckSatResult, Context, Solver, init } from 'z3-solver';
import { SPEED_ZONES, plane, type SpeedZone, type VesselPosition } from './fleet.js';

/**
 * Formal check of the fleet's safety constraints with Z3. Positions are fixed in the local plane in whole
 * centimetres and speeds in tenths of a knot, so every constraint is exact integer arithmetic; the solver
 * is asked for the NEGATION of the property ("some pair is closer than the threshold, or some vessel in a
 * zone is over its limit"). unsat is a proof that the fleet is safe; sat comes with a witness, from which
 * every violation is read, and a second query proves that no other violation exists.
 */

/** Default minimum separation: a quarter of a nautical mile. */
export const DEFAULT_MIN_SEPARATION_M = 463;
/**
 * Violations an answer lists, of each kind: the closest pairs first, speed violations by vessel. Every one is
 * still found and counted (`crossCheck`), and the proof covers them all; a fleet in disarray does not make
 * an answer of unbounded size.
 */
export const MAX_LISTED_VIOLATIONS = 100;
/** Up to this many vessels every pair goes to the solver; beyond it, only pairs a grid cannot rule out. */
const ALL_PAIRS_UP_TO = 150;

export interface SeparationViolation {
  a: string;
  b: string;
  distanceM: number;
}

export interface SpeedViolation {
  mmsi: string;
  zoneId: string;
  speedKnots: number;
  limitKnots: number;
}

interface SolverQuery {
  /** What was asked, in words. */
  query: string;
  result: 'sat' | 'unsat' | 'unknown';
  ms: number;
}

export interface Verification {
  safe: boolean;
  status: 'PROVED_SAFE' | 'VIOLATIONS_FOUND';
  minSeparationM: number;
  vesselCount: number;
  zones: readonly SpeedZone[];
  /** Pairs of vessels, n(n-1)/2. */
  pairs: number;
  /** Pairs given to the solver (all of them, or those in the same or adjacent grid cells). */
  solverPairs: number;
  /** The MAX_LISTED_VIOLATIONS closest pairs under the threshold (crossCheck counts them all). */
  separationViolations: SeparationViolation[];
  /** The first MAX_LISTED_VIOLATIONS, zone by zone (crossCheck counts them all). */
  speedViolations: SpeedViolation[];
  closest: SeparationViolation | null;
  proof: string;
  solver: { name: string; version: string; queries: SolverQuery[] };
  crossCheck: { method: string; separationViolations: number; speedViolations: number; agrees: boolean };
  durationMs: number;
}

interface Fixed {
  mmsi: string;
  x: number;
  y: number;
  /** Tenths of a knot. */
  speed: number;
}

const fix = (v: VesselPosition): Fixed => {
  const p = plane.project(v);
  return { mmsi: v.mmsi, x: Math.round(p.x * 100), y: Math.round(p.y * 100), speed: Math.round(v.sog * 10) };
};

const zoneFixed = (zones: readonly SpeedZone[]) =>
  zones.map((z) => {
    const c = plane.project(z.center);
    return { zone: z, x: Math.round(c.x * 100), y: Math.round(c.y * 100), r2: Math.round(z.radiusM * 100) ** 2, limit: Math.round(z.limitKnots * 10) };
  });

const dist2 = (a: Fixed, b: Fixed) => (a.x - b.x) ** 2 + (a.y - b.y) ** 2;
const metres = (d2: number) => Math.round(Math.sqrt(d2)) / 100;

/** Candidate pairs: every pair for a small fleet; otherwise pairs in the same or adjacent cells of a d-sized grid. */
function candidatePairs(vessels: Fixed[], minCm: number): [number, number][] {
  const pairs: [number, number][] = [];
  if (vessels.length <= ALL_PAIRS_UP_TO) {
    for (let i = 0; i < vessels.length; i++) for (let j = i + 1; j < vessels.length; j++) pairs.push([i, j]);
    return pairs;
  }
  const cells = new Map<string, number[]>();
  const cellOf = (v: Fixed) => [Math.floor(v.x / minCm), Math.floor(v.y / minCm)] as const;
  vessels.forEach((v, i) => {
    const [cx, cy] = cellOf(v);
    const key = `${cx},${cy}`;
    const list = cells.get(key);
    if (list) list.push(i);
    else cells.set(key, [i]);
  });
  vessels.forEach((v, i) => {
    const [cx, cy] = cellOf(v);
    for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) for (const j of cells.get(`${cx + dx},${cy + dy}`) ?? []) if (j > i) pairs.push([i, j]);
  });
  return pairs;
}

/** The independent check: every pair and every vessel-zone combination, in plain integer arithmetic. */
export function plainCheck(vessels: readonly VesselPosition[], minSeparationM: number, zones: readonly SpeedZone[] = SPEED_ZONES) {
  const fixed = vessels.map(fix);
  const min2 = Math.round(minSeparationM * 100) ** 2;
  const separation: SeparationViolation[] = [];
  for (let i = 0; i < fixed.length; i++)
    for (let j = i + 1; j < fixed.length; j++) {
      const d2 = dist2(fixed[i]!, fixed[j]!);
      if (d2 < min2) separation.push({ a: fixed[i]!.mmsi, b: fixed[j]!.mmsi, distanceM: metres(d2) });
    }
  const speed: SpeedViolation[] = [];
  for (const z of zoneFixed(zones))
    for (const v of fixed)
      if ((v.x - z.x) ** 2 + (v.y - z.y) ** 2 <= z.r2 && v.speed > z.limit)
        speed.push({ mmsi: v.mmsi, zoneId: z.zone.id, speedKnots: v.speed / 10, limitKnots: z.limit / 10 });
  return { separation, speed };
}

type Z3 = Awaited<ReturnType<typeof init>>;
let z3: Promise<Z3> | null = null;
/** Z3 is WebAssembly: loaded, compiled and instantiated once per process (a few hundred ms), then reused. */
export function loadZ3(): Promise<Z3> {
  z3 ??= import('z3-solver').then((m) => m.init());
  return z3;
}

let queue: Promise<unknown> = Promise.resolve();
/** One verification at a time: the solver's context is shared. */
export function verifyFleet(
  vessels: readonly VesselPosition[],
  minSeparationM = DEFAULT_MIN_SEPARATION_M,
  zones: readonly SpeedZone[] = SPEED_ZONES,
): Promise<Verification> {
  const run = queue.then(() => verifyNow(vessels, minSeparationM, zones));
  queue = run.catch(() => undefined);
  return run;
}

async function verifyNow(vessels: readonly VesselPosition[], minSeparationM: number, zones: readonly SpeedZone[]): Promise<Verification> {
  const t0 = performance.now();
  const api = await loadZ3();
  const ctx = api.Context('fleet');
  const fixed = vessels.map(fix);
  const minCm = Math.round(minSeparationM * 100);
  const zoneList = zoneFixed(zones);
  const encoding = encodeFleet(ctx, fixed, minCm, zoneList);
  const { proof, separationViolations, speedViolations, queries } = await prove(ctx, encoding, fixed, zoneList, { minSeparationM, minCm });

  const plain = plainCheck(vessels, minSeparationM, zones);
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const agrees =
    same(plain.separation.map(pairKey).sort(), separationViolations.map(pairKey).sort()) &&
    same(plain.speed.map((v) => `${v.mmsi}|${v.zoneId}`).sort(), speedViolations.map((v) => `${v.mmsi}|${v.zoneId}`).sort());
  if (!agrees) throw new Error('the solver and the plain check disagree');

  const safe = separationViolations.length === 0 && speedViolations.length === 0;
  return {
    safe,
    status: safe ? 'PROVED_SAFE' : 'VIOLATIONS_FOUND',
    minSeparationM,
    vesselCount: fixed.length,
    zones,
    pairs: (fixed.length * (fixed.length - 1)) / 2,
    solverPairs: encoding.pairs.length,
    separationViolations: separationViolations
      .sort((a, b) => a.distanceM - b.distanceM || pairKey(a).localeCompare(pairKey(b)))
      .slice(0, MAX_LISTED_VIOLATIONS),
    speedViolations: speedViolations.slice(0, MAX_LISTED_VIOLATIONS),
    closest: closestPair(fixed),
    proof,
    solver: { name: 'z3', version: api.getVersionString(), queries },
    crossCheck: {
      method: 'all pairs and all vessel-zone combinations in integer arithmetic',
      separationViolations: plain.separation.length,
      speedViolations: plain.speed.length,
      agrees,
    },
    durationMs: Math.round(performance.now() - t0),
  };
}

const pairKey = (v: SeparationViolation) => `${v.a}|${v.b}`;

type FleetContext = Context<'fleet'>;
type ZoneFixed = ReturnType<typeof zoneFixed>[number];

/** The fleet as solver constants, and one term per candidate pair and per vessel-zone combination that is true where it is violated. */
interface FleetEncoding {
  solver: Solver<'fleet'>;
  pairs: [number, number][];
  separationTerms: Bool<'fleet'>[];
  speedTerms: Bool<'fleet'>[];
  /** The vessel and zone of each speed term. */
  speedKeys: [number, number][];
}

function encodeFleet(ctx: FleetContext, fixed: Fixed[], minCm: number, zoneList: readonly ZoneFixed[]): FleetEncoding {
  // z3-solver's Context members are closures over their context, not methods that read `this`.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const { Int, And } = ctx;
  const X = fixed.map((v, i) => Int.const(`x_${i}`));
  const Y = fixed.map((v, i) => Int.const(`y_${i}`));
  const S = fixed.map((v, i) => Int.const(`s_${i}`));
  const solver = new ctx.Solver();
  fixed.forEach((v, i) => {
    solver.add(X[i]!.eq(Int.val(v.x)), Y[i]!.eq(Int.val(v.y)), S[i]!.eq(Int.val(v.speed)));
  });
  const pairs = candidatePairs(fixed, minCm);
  const min2 = Int.val(BigInt(minCm) ** 2n);
  const sq = (e: ReturnType<typeof Int.const>) => e.mul(e);
  const separationTerms = pairs.map(([i, j]) =>
    sq(X[i]!.sub(X[j]!))
      .add(sq(Y[i]!.sub(Y[j]!)))
      .lt(min2),
  );
  const speedKeys: [number, number][] = [];
  const speedTerms = zoneList.flatMap((z, zi) =>
    fixed.map((_, i) => {
      speedKeys.push([i, zi]);
      return And(
        sq(X[i]!.sub(Int.val(z.x)))
          .add(sq(Y[i]!.sub(Int.val(z.y))))
          .le(Int.val(BigInt(z.r2))),
        S[i]!.gt(Int.val(z.limit)),
      );
    }),
  );
  return { solver, pairs, separationTerms, speedTerms, speedKeys };
}

/**
 * Asks for the negated property: unsat is the proof of safety; sat lists every violation the model makes
 * true, and a second query, with those excluded, proves the list complete.
 */
async function prove(
  ctx: FleetContext,
  encoding: FleetEncoding,
  fixed: Fixed[],
  zoneList: readonly ZoneFixed[],
  { minSeparationM, minCm }: { minSeparationM: number; minCm: number },
): Promise<{ proof: string; separationViolations: SeparationViolation[]; speedViolations: SpeedViolation[]; queries: SolverQuery[] }> {
  const { solver, pairs, separationTerms, speedTerms } = encoding;
  const terms = [...separationTerms, ...speedTerms];
  const queries: SolverQuery[] = [];
  const ask = async (query: string) => {
    const t = performance.now();
    const result = await solver.check();
    queries.push({ query, result, ms: Math.round(performance.now() - t) });
    return result;
  };
  solver.push();
  if (terms.length > 0) solver.add(ctx.Or(...terms));
  else solver.add(ctx.Bool.val(false));
  const first = await ask('exists a pair closer than the threshold or a vessel in a zone over its limit');
  if (first === 'unknown') throw new Error('the solver answered unknown');
  if (first === 'unsat') {
    const proof =
      `unsat: given the ${fixed.length} positions (cm, local plane) and speeds (0.1 kn), no assignment satisfies ` +
      `"some pair has dx^2 + dy^2 < ${minCm}^2 cm^2, or some vessel inside one of ${zoneList.length} zones exceeds its limit"; ` +
      `the negated property is unsatisfiable, so every pair is at least ${minSeparationM} m apart and every zone limit holds` +
      (pairs.length < (fixed.length * (fixed.length - 1)) / 2
        ? ` (the solver was given the ${pairs.length} pairs in the same or adjacent ${minSeparationM} m grid cells; pairs further apart differ by at least ${minSeparationM} m in x or y).`
        : '.');
    solver.pop();
    return { proof, separationViolations: [], speedViolations: [], queries };
  }
  const listed = await listViolations(ctx, encoding, fixed, zoneList, ask);
  solver.pop();
  return { ...listed, queries };
}

/** Every violation the solver's model makes true; then, with those excluded, the query that proves there is no other. */
async function listViolations(
  ctx: FleetContext,
  encoding: FleetEncoding,
  fixed: Fixed[],
  zoneList: readonly ZoneFixed[],
  ask: (query: string) => Promise<CheckSatResult>,
): Promise<{ proof: string; separationViolations: SeparationViolation[]; speedViolations: SpeedViolation[] }> {
  const { solver, pairs, separationTerms, speedTerms, speedKeys } = encoding;
  const terms = [...separationTerms, ...speedTerms];
  const model = solver.model();
  const isTrue = (e: Bool<'fleet'>) => ctx.isTrue(model.eval(e, true));
  const violated: number[] = [];
  const separationViolations: SeparationViolation[] = [];
  const speedViolations: SpeedViolation[] = [];
  separationTerms.forEach((t, k) => {
    if (!isTrue(t)) return;
    violated.push(k);
    const [i, j] = pairs[k]!;
    separationViolations.push({ a: fixed[i]!.mmsi, b: fixed[j]!.mmsi, distanceM: metres(dist2(fixed[i]!, fixed[j]!)) });
  });
  speedTerms.forEach((t, k) => {
    if (!isTrue(t)) return;
    violated.push(separationTerms.length + k);
    const [i, zi] = speedKeys[k]!;
    speedViolations.push({ mmsi: fixed[i]!.mmsi, zoneId: zoneList[zi]!.zone.id, speedKnots: fixed[i]!.speed / 10, limitKnots: zoneList[zi]!.limit / 10 });
  });
  solver.pop();
  const violatedSet = new Set(violated);
  const rest = terms.filter((_, k) => !violatedSet.has(k));
  solver.push();
  solver.add(rest.length > 0 ? ctx.Or(...rest) : ctx.Bool.val(false));
  const second = await ask('exists a violation other than those listed');
  if (second !== 'unsat') throw new Error(`the completeness query answered ${second}`);
  const witness = [
    ...separationViolations.slice(0, 3).map((v) => `${v.a} and ${v.b} are ${v.distanceM} m apart`),
    ...speedViolations.slice(0, 3).map((v) => `${v.mmsi} makes ${v.speedKnots} kn in ${v.zoneId} (limit ${v.limitKnots} kn)`),
  ].join('; ');
  const proof =
    `sat: the negated property has a model, a witness that the fleet is unsafe: ${witness}` +
    `${separationViolations.length + speedViolations.length > 6 ? '; ...' : ''}. ` +
    `With those ${violated.length} violations excluded the negated property is unsatisfiable, so the list is complete.`;
  return { proof, separationViolations, speedViolations };
}

/** The closest pair of the fleet, over every pair (null for fewer than two vessels). */
function closestPair(fixed: readonly Fixed[]): SeparationViolation | null {
  let closest: SeparationViolation | null = null;
  let best = Infinity;
  for (let i = 0; i < fixed.length; i++)
    for (let j = i + 1; j < fixed.length; j++) {
      const d2 = dist2(fixed[i]!, fixed[j]!);
      if (d2 < best) {
        best = d2;
        closest = { a: fixed[i]!.mmsi, b: fixed[j]!.mmsi, distanceM: metres(d2) };
      }
    }
  return closest;
}
