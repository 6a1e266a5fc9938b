import { Random } from '../../platform/random.js';
import { sigmoid } from '../../platform/statistics.js';
import { DAY_MS, HOUR_MS } from './frame.js';

/**
 * A seeded insurance world: motor policies whose attributes change over time (slowly changing dimension
 * type 2), claims with their own timelines, and the label rows of three models. The same seed and size
 * give the same world on every platform. Leakage traps are planted on purpose (docs/features.md):
 * - mild: after every claim the underwriter re-scores the policy a few days later (`risk_score`), more
 *   for a claim that looks suspicious, so a latest-value join sees a score from after the event;
 * - severe: `claim_settlement` rows (settlement amount, investigation flag) only exist after the outcome.
 */

/**
 * The generator's version: part of the stored world's folder name, so files written by an older generator
 * are never read as this one's world. Raise it with every change to what generateWorld produces.
 */
export const GENERATOR_VERSION = 2;

const WORLD_START = Date.UTC(2022, 0, 1);
const WORLD_END = Date.UTC(2026, 0, 1);
const YEAR_MS = 365 * DAY_MS;

export interface PolicyVersion {
  policyId: string;
  /** When the version took effect (valid_from); the feature_timestamp. */
  featureTs: number;
  /** When the row reached the warehouse; a late correction has the same featureTs and a later createdTs. */
  createdTs: number;
  validFrom: number;
  /** valid_from of the next version, or null while current (SCD type 2). */
  validTo: number | null;
  reason: 'inception' | 'renewal' | 'change' | 'rescore' | 'correction';
  driverAge: number;
  vehicleAgeYears: number;
  vehicleValue: number;
  regionRisk: number;
  noClaimsYears: number;
  annualPremium: number;
  riskScore: number;
}

export interface Claim {
  claimId: string;
  policyId: string;
  occurredAt: number;
  reportedAt: number;
  amount: number;
  policeReport: number;
  incidentType: number;
  policyTenureDays: number;
  fraud: number;
  settledAt: number;
  settlementAmount: number;
  investigationFlag: number;
}

export interface ClaimReportRow {
  claimId: string;
  featureTs: number;
  createdTs: number;
  reportedAmount: number;
  reportLagDays: number;
  policeReport: number;
  incidentType: number;
  policyTenureDays: number;
}

export interface SnapshotRow {
  policyId: string;
  featureTs: number;
  createdTs: number;
  claimsCount12m: number;
  claimsAmount12m: number;
  openClaims: number;
}

export type ModelName = 'underwriting' | 'pricing' | 'fraud';

export interface LabelRow {
  policyId: string;
  claimId: string | null;
  eventTs: number;
  label: number;
}

export interface World {
  seed: number;
  policyIds: string[];
  claimIds: string[];
  policyVersions: PolicyVersion[];
  claims: Claim[];
  claimReports: ClaimReportRow[];
  snapshots: SnapshotRow[];
  labels: Record<ModelName, LabelRow[]>;
}

export interface WorldOptions {
  seed: number;
  policies: number;
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const pad = (n: number) => String(n).padStart(6, '0');

export function generateWorld({ seed, policies }: WorldOptions): World {
  const rng = new Random(seed, 'features-world');
  const world: World = {
    seed,
    policyIds: [],
    claimIds: [],
    policyVersions: [],
    claims: [],
    claimReports: [],
    snapshots: [],
    labels: { underwriting: [], pricing: [], fraud: [] },
  };
  for (let p = 1; p <= policies; p++) generatePolicy(rng, world, `P-${pad(p)}`);
  reportClaims(rng, world);
  return world;
}

/** Claim-cost factor of each region, by the region's index. */
const REGION_RISK = [0.7, 1.0, 1.35, 1.8];

/** A policy's attributes as they stand: they change at renewals and mid-term changes. */
interface PolicyState {
  driverAge: number;
  vehicleAgeYears: number;
  vehicleValue: number;
  regionRisk: number;
  noClaimsYears: number;
  /** A policyholder trait the features only hint at (through the claims it causes). */
  hidden: number;
}

/** The versions of one policy so far, and how a new one is priced and scored from the policy's state. */
interface PolicyHistory {
  versions: Omit<PolicyVersion, 'validTo'>[];
  add(at: number, reason: PolicyVersion['reason'], riskBump?: number): void;
}

/**
 * One policy from inception to the end of the world: its yearly terms with their claims, re-scores and
 * changes, its versions (SCD type 2), its claims and its monthly claims-history snapshots, and the
 * underwriting and pricing labels of each whole term.
 */
function generatePolicy(rng: Random, world: World, policyId: string): void {
  world.policyIds.push(policyId);
  const inception = WORLD_START + Math.floor(rng.uniform(0, 2 * YEAR_MS) / HOUR_MS) * HOUR_MS;
  const region = rng.choice([30, 40, 20, 10]);
  const state: PolicyState = {
    driverAge: Math.round(18 + rng.gamma(3, 9)),
    vehicleAgeYears: rng.int(15),
    vehicleValue: round2(rng.logNormal(Math.log(18_000), 0.5)),
    regionRisk: REGION_RISK[region]!,
    noClaimsYears: rng.int(10),
    hidden: rng.normal(0, 0.35),
  };
  const history = policyHistory(rng, policyId, state);
  history.add(inception, 'inception');
  const claimsOfPolicy: Claim[] = [];
  for (let termStart = inception; termStart + YEAR_MS <= WORLD_END + YEAR_MS && termStart < WORLD_END; termStart += YEAR_MS) {
    const termClaims = simulateTerm(rng, { policyId, inception, termStart, state, history, earlierClaims: claimsOfPolicy });
    claimsOfPolicy.push(...termClaims);
    if (termStart + YEAR_MS <= WORLD_END) {
      const cost = termClaims.filter((c) => c.occurredAt < termStart + YEAR_MS).reduce((s, c) => s + c.amount, 0);
      world.labels.underwriting.push({ policyId, claimId: null, eventTs: termStart, label: termClaims.length > 0 ? 1 : 0 });
      world.labels.pricing.push({ policyId, claimId: null, eventTs: termStart, label: round2(cost) });
    }
  }
  recordVersions(rng, world, history.versions);
  for (const claim of claimsOfPolicy) world.claims.push(claim);
  recordSnapshots(world, policyId, inception, claimsOfPolicy);
}

function policyHistory(rng: Random, policyId: string, state: PolicyState): PolicyHistory {
  const versions: Omit<PolicyVersion, 'validTo'>[] = [];
  const add = (at: number, reason: PolicyVersion['reason'], riskBump = 0) => {
    const base =
      0.09 * Math.exp(0.9 * (state.driverAge < 25 ? 1 : 0) + 0.7 * Math.log(state.regionRisk) + 0.025 * state.vehicleAgeYears - 0.07 * state.noClaimsYears);
    const last = versions[versions.length - 1];
    const riskScore = round2(Math.min(100, 100 * base + riskBump + (reason === 'rescore' && last ? last.riskScore - 100 * base : 0)));
    versions.push({
      policyId,
      featureTs: at,
      createdTs: at + Math.round(rng.uniform(5, 180)) * 60_000,
      validFrom: at,
      reason,
      driverAge: state.driverAge,
      vehicleAgeYears: state.vehicleAgeYears,
      vehicleValue: state.vehicleValue,
      regionRisk: state.regionRisk,
      noClaimsYears: state.noClaimsYears,
      annualPremium: round2(420 * (1 + 9 * base) * (0.6 + state.vehicleValue / 40_000)),
      riskScore,
    });
  };
  return { versions, add };
}

interface Term {
  policyId: string;
  inception: number;
  termStart: number;
  state: PolicyState;
  history: PolicyHistory;
  /** The policy's claims of the terms before this one. */
  earlierClaims: readonly Claim[];
}

/**
 * One policy term: the renewal (after the first term), the claims it brings (Poisson, by the policy's risk
 * and hidden trait), and the re-scores and mid-term change that follow, each a new version. Returns the
 * term's claims in the order they were reported.
 */
function simulateTerm(rng: Random, term: Term): Claim[] {
  const { inception, termStart, state, history } = term;
  if (termStart > inception) {
    state.driverAge += 1;
    state.vehicleAgeYears += 1;
    const claimedLastTerm = term.earlierClaims.some((c) => c.occurredAt >= termStart - YEAR_MS && c.occurredAt < termStart);
    state.noClaimsYears = claimedLastTerm ? 0 : state.noClaimsYears + 1;
    history.add(termStart, 'renewal');
  }
  // A mid-term change: a move to another region or a new vehicle.
  const changeAt = termStart + Math.floor((rng.uniform(30, 330) * DAY_MS) / 60_000) * 60_000;
  const hasChange = rng.bernoulli(0.3) && changeAt < WORLD_END;
  const lambda =
    0.11 *
    Math.exp(
      0.9 * (state.driverAge < 25 ? 1 : 0) + 0.8 * Math.log(state.regionRisk) + 0.03 * state.vehicleAgeYears - 0.08 * state.noClaimsYears + state.hidden,
    );
  const claimCount = rng.poisson(lambda);
  const termClaims: Claim[] = [];
  for (let k = 0; k < claimCount; k++) {
    const claim = drawClaim(rng, term);
    if (claim) termClaims.push(claim);
  }
  termClaims.sort((a, b) => a.reportedAt - b.reportedAt);
  applyTermEvents(rng, term, termClaims, hasChange ? changeAt : null);
  return termClaims;
}

/**
 * A claim of the term: when it occurred and was reported (most within days, some weeks later), its kind
 * and amount, whether it is fraud (likelier when reported late, early in the policy, without a police
 * report), and its settlement. Null when it is reported after the end of the world.
 */
function drawClaim(rng: Random, term: Term): Claim | null {
  const { policyId, inception, termStart, state } = term;
  const occurredAt = termStart + Math.floor(rng.uniform(0, YEAR_MS) / 60_000) * 60_000;
  const lagDays = rng.bernoulli(0.85) ? rng.gamma(1.2, 2) : rng.uniform(14, 60);
  const reportedAt = occurredAt + Math.round(lagDays * 24) * HOUR_MS;
  if (reportedAt >= WORLD_END) return null;
  const policeReport = rng.bernoulli(0.45) ? 1 : 0;
  const incidentType = rng.choice([50, 25, 15, 10]);
  const tenureDays = Math.floor((occurredAt - inception) / DAY_MS);
  const amountBase = rng.logNormal(Math.log(2200) + 0.5 * Math.log(state.vehicleValue / 18_000) + [0, 0.3, 0.9, -0.4][incidentType]!, 0.75);
  const fraudP = sigmoid(
    -3.1 +
      1.3 * (lagDays > 14 ? 1 : 0) +
      0.9 * (tenureDays < 90 ? 1 : 0) -
      0.9 * policeReport +
      0.5 * (incidentType === 2 ? 1 : 0) +
      0.35 * Math.log(amountBase / 2200),
  );
  const fraud = rng.bernoulli(fraudP) ? 1 : 0;
  const amount = round2(amountBase * (fraud ? 1.5 : 1));
  const investigationFlag = rng.bernoulli(fraud ? 0.85 : 0.05) ? 1 : 0;
  const settledAt = reportedAt + Math.round(rng.gamma(2.5, 18) * 24 + 72) * HOUR_MS;
  return {
    claimId: '',
    policyId,
    occurredAt,
    reportedAt,
    amount,
    policeReport,
    incidentType,
    policyTenureDays: tenureDays,
    fraud,
    settledAt,
    settlementAmount: round2(fraud && investigationFlag ? 0 : amount * rng.uniform(0.7, 1)),
    investigationFlag,
  };
}

/**
 * The versions that follow the term's claims and change, in time order within the term: the underwriter
 * re-scores a few days after each reported claim (more for one that looks suspicious), and a mid-term
 * change moves the policy to another region or vehicle.
 */
function applyTermEvents(rng: Random, term: Term, termClaims: readonly Claim[], changeAt: number | null): void {
  const { termStart, state, history } = term;
  const events: { at: number; apply: () => void; reason: PolicyVersion['reason']; bump: number }[] = [];
  for (const claim of termClaims) {
    const suspicion = claim.fraud ? rng.uniform(12, 30) : rng.uniform(0, 10);
    events.push({ at: claim.reportedAt + Math.round(rng.uniform(1, 10) * 24) * HOUR_MS, apply: () => undefined, reason: 'rescore', bump: suspicion });
  }
  if (changeAt !== null) {
    events.push({
      at: changeAt,
      apply: () => {
        if (rng.bernoulli(0.5)) state.regionRisk = REGION_RISK[rng.int(4)]!;
        else {
          state.vehicleAgeYears = rng.int(6);
          state.vehicleValue = round2(rng.logNormal(Math.log(22_000), 0.45));
        }
      },
      reason: 'change',
      bump: 0,
    });
  }
  events.sort((a, b) => a.at - b.at);
  for (const e of events) {
    if (e.at >= WORLD_END || e.at >= termStart + YEAR_MS) continue;
    e.apply();
    history.add(e.at, e.reason, e.bump);
  }
}

/** SCD2: each version is valid until the next one; late corrections repeat a version's feature_timestamp. */
function recordVersions(rng: Random, world: World, versions: Omit<PolicyVersion, 'validTo'>[]): void {
  versions.sort((a, b) => a.featureTs - b.featureTs || a.createdTs - b.createdTs);
  versions.forEach((v, i) => {
    const next = versions[i + 1];
    world.policyVersions.push({ ...v, validTo: next ? next.featureTs : null });
    if (rng.bernoulli(0.04)) {
      world.policyVersions.push({
        ...v,
        validTo: next ? next.featureTs : null,
        reason: 'correction',
        createdTs: v.createdTs + Math.round(rng.uniform(2, 30) * 24) * HOUR_MS,
        annualPremium: round2(v.annualPremium * rng.uniform(0.95, 1.05)),
      });
    }
  });
}

/** Monthly snapshots of the claims history as known on the 1st (reported claims only). */
function recordSnapshots(world: World, policyId: string, inception: number, claimsOfPolicy: readonly Claim[]): void {
  for (let m = monthStart(inception, 1); m < WORLD_END; m = monthStart(m, 1)) {
    const known = claimsOfPolicy.filter((c) => c.reportedAt <= m && c.reportedAt > m - YEAR_MS);
    world.snapshots.push({
      policyId,
      featureTs: m,
      createdTs: m + 6 * HOUR_MS,
      claimsCount12m: known.length,
      claimsAmount12m: round2(known.reduce((s, c) => s + c.amount, 0)),
      openClaims: claimsOfPolicy.filter((c) => c.reportedAt <= m && c.settledAt > m).length,
    });
  }
}

/**
 * Every claim of the world in report order: its id, its report row (some corrected days later), and the
 * fraud label of each claim settled within the world.
 */
function reportClaims(rng: Random, world: World): void {
  world.claims.sort((a, b) => a.reportedAt - b.reportedAt || a.policyId.localeCompare(b.policyId));
  world.claims.forEach((claim, i) => {
    claim.claimId = `C-${pad(i + 1)}`;
    world.claimIds.push(claim.claimId);
    const row: ClaimReportRow = {
      claimId: claim.claimId,
      featureTs: claim.reportedAt,
      createdTs: claim.reportedAt + HOUR_MS,
      reportedAmount: claim.amount,
      reportLagDays: round2((claim.reportedAt - claim.occurredAt) / DAY_MS),
      policeReport: claim.policeReport,
      incidentType: claim.incidentType,
      policyTenureDays: claim.policyTenureDays,
    };
    world.claimReports.push(row);
    // A late correction of the reported amount: same feature_timestamp, created days later.
    if (rng.bernoulli(0.05)) {
      world.claimReports.push({
        ...row,
        createdTs: row.createdTs + Math.round(rng.uniform(1, 20) * 24) * HOUR_MS,
        reportedAmount: round2(row.reportedAmount * rng.uniform(0.8, 1.2)),
      });
    }
    if (claim.settledAt < WORLD_END) {
      // Scored when the report is recorded (its row created): as known, the report exists from then on.
      world.labels.fraud.push({ policyId: claim.policyId, claimId: claim.claimId, eventTs: row.createdTs, label: claim.fraud });
    }
  });
}

function monthStart(t: number, add: number): number {
  const d = new Date(t);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + add, 1);
}
