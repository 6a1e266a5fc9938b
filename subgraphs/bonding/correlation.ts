import { riskGroupProfile, unavailability } from './link-model.js';

/**
 * Failure correlation of paths as a common-shock (Marshall-Olkin) model: path i is down when its own
 * fault is present (probability o_i, independent of everything else) or when any shared-risk group it
 * depends on is down (probability q_g, groups independent of each other). This is a real joint
 * distribution, so every pairwise figure is consistent (no correlation outside the Frechet bounds), and
 * paths that share infrastructure are positively correlated by construction:
 *
 *   P(i up)        = (1 - o_i) * prod_{g in G_i} (1 - q_g)
 *   P(i, j up)     = (1 - o_i)(1 - o_j) * prod_{g in G_i u G_j} (1 - q_g)
 *   P(i, j down)   = 1 - P(i up) - P(j up) + P(i, j up)
 *   rho_ij         = (P(i, j down) - p_i p_j) / sqrt(p_i (1 - p_i) p_j (1 - p_j)),  p_i = 1 - P(i up)
 */
export interface RiskPath {
  id: string;
  /** Probability that the path's own fault is present (independent part). */
  ownOutage: number;
  /** Shared-risk group names. */
  sharedRisk: readonly string[];
}

export class RiskModel {
  /** Group index per path, sorted ascending. */
  private readonly groupsOf: Int32Array[];
  /** ln(1 - q_g) per group. */
  private readonly logGroupUp: Float64Array;
  /** ln P(i up). */
  private readonly logUp: Float64Array;
  /** ln(1 - o_i). */
  private readonly logOwnUp: Float64Array;
  /** Marginal outage probability per path. */
  private readonly outages: Float64Array;
  readonly groupNames: string[];

  constructor(
    readonly paths: readonly RiskPath[],
    groupOutage: (name: string) => number = defaultGroupOutage,
  ) {
    const index = new Map<string, number>();
    for (const p of paths) for (const g of p.sharedRisk) if (!index.has(g)) index.set(g, index.size);
    this.groupNames = [...index.keys()];
    this.logGroupUp = Float64Array.from(this.groupNames, (g) => Math.log1p(-clampProbability(groupOutage(g))));
    this.groupsOf = paths.map((p) => Int32Array.from(new Set(p.sharedRisk), (g) => index.get(g)!).sort());
    this.logOwnUp = Float64Array.from(paths, (p) => Math.log1p(-clampProbability(p.ownOutage)));
    this.logUp = Float64Array.from(paths, (_, i) => {
      let s = this.logOwnUp[i]!;
      for (const g of this.groupsOf[i]!) s += this.logGroupUp[g]!;
      return s;
    });
    this.outages = this.logUp.map((l) => -Math.expm1(l));
  }

  /** Marginal outage probability of path i. */
  outage(i: number): number {
    return this.outages[i]!;
  }

  /** Probability that paths i and j are down at the same time. */
  jointOutage(i: number, j: number): number {
    if (i === j) return this.outage(i);
    // Groups in both are counted once: subtract the shared ones from the sum of the two.
    let shared = 0;
    const a = this.groupsOf[i]!;
    const b = this.groupsOf[j]!;
    for (let x = 0, y = 0; x < a.length && y < b.length;) {
      if (a[x] === b[y]) {
        shared += this.logGroupUp[a[x]!]!;
        x++;
        y++;
      } else if (a[x]! < b[y]!) x++;
      else y++;
    }
    // 1 - P(i up) - P(j up) + P(i up) P(j up) e^{-s} = p_i p_j + P(i up) P(j up) (e^{-s} - 1), s <= 0:
    // no cancellation, and never below p_i p_j in floating point (the search's bound relies on it).
    return this.outage(i) * this.outage(j) + Math.exp(this.logUp[i]! + this.logUp[j]!) * Math.expm1(-shared);
  }

  /** Pearson correlation of the two paths' down indicators. */
  correlation(i: number, j: number): number {
    if (i === j) return 1;
    const pi = this.outage(i);
    const pj = this.outage(j);
    const denom = Math.sqrt(pi * (1 - pi) * pj * (1 - pj));
    if (denom === 0) return 0;
    return (this.jointOutage(i, j) - pi * pj) / denom;
  }

  /** The shared-risk groups two paths have in common. */
  sharedGroups(i: number, j: number): string[] {
    const b = new Set(this.groupsOf[j]);
    return [...this.groupsOf[i]!].filter((g) => b.has(g)).map((g) => this.groupNames[g]!);
  }

  matrix(): number[][] {
    return this.paths.map((_, i) => this.paths.map((__, j) => this.correlation(i, j)));
  }
}

export function defaultGroupOutage(name: string): number {
  return unavailability(riskGroupProfile(name));
}

function clampProbability(p: number): number {
  return Math.min(1 - 1e-12, Math.max(0, p));
}
