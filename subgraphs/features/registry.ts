import { createHash } from 'node:crypto';
import { parseDuration } from './duration.js';
import type { EntityType, ViewData } from './frame.js';
import type { World } from './generator.js';

/**
 * The feature registry: every feature view with its entity, features, types, TTL and source. A view's
 * version is a hash of its definition, so an online value names the definition it was computed under.
 */

export type FeatureType = 'FLOAT' | 'INT' | 'BOOL';

interface FeatureDefinition {
  name: string;
  type: FeatureType;
  description: string;
}

export interface ViewDefinition {
  name: string;
  entity: EntityType;
  description: string;
  /** Where the rows come from (a table of the generated world, or the outbox). */
  source: string;
  /** ISO 8601 duration, or null for none. */
  ttl: string | null;
  features: readonly FeatureDefinition[];
  /** Rows that exist only after the outcome they would predict (planted on purpose, for the leakage audit). */
  postOutcome: boolean;
}

const f = (name: string, type: FeatureType, description: string): FeatureDefinition => ({ name, type, description });

export const VIEW_DEFINITIONS: readonly ViewDefinition[] = [
  {
    name: 'policy_profile',
    entity: 'policy',
    description: 'Policy attributes, one row per SCD type 2 version (inception, renewal, mid-term change, re-score, late correction)',
    source: 'policy_versions (valid_from = feature_timestamp, valid_to = next valid_from)',
    ttl: null,
    postOutcome: false,
    features: [
      f('driver_age', 'INT', 'age of the main driver in years'),
      f('vehicle_age_years', 'INT', 'age of the insured vehicle'),
      f('vehicle_value', 'FLOAT', 'insured value of the vehicle, EUR'),
      f('region_risk', 'FLOAT', 'relative claim frequency of the garaging region (0.7 .. 1.8)'),
      f('no_claims_years', 'INT', 'claim-free years'),
      f('annual_premium', 'FLOAT', 'annual premium, EUR'),
      f('risk_score', 'FLOAT', "underwriter's risk score (0 .. 100); re-scored a few days after each claim"),
    ],
  },
  {
    name: 'policy_claims_history',
    entity: 'policy',
    description: 'Claims history of a policy as known on the first of each month (reported claims only)',
    source: 'monthly snapshots of claims (created 6 hours after the snapshot instant)',
    ttl: 'P35D',
    postOutcome: false,
    features: [
      f('claims_count_12m', 'INT', 'claims reported in the 12 months before the snapshot'),
      f('claims_amount_12m', 'FLOAT', 'amount of those claims, EUR'),
      f('open_claims', 'INT', 'claims reported and not yet settled'),
    ],
  },
  {
    name: 'claim_report',
    entity: 'claim',
    description: 'First notice of loss, as reported (late corrections of the amount included)',
    source: 'claim_reports (feature_timestamp = reported_at)',
    ttl: null,
    postOutcome: false,
    features: [
      f('reported_amount', 'FLOAT', 'amount claimed, EUR'),
      f('report_lag_days', 'FLOAT', 'days from the incident to the report'),
      f('police_report', 'BOOL', '1 when a police report was filed'),
      f('incident_type', 'INT', '0 collision, 1 theft, 2 fire, 3 glass'),
      f('policy_tenure_days', 'INT', 'days since policy inception at the incident'),
    ],
  },
  {
    name: 'claim_settlement',
    entity: 'claim',
    description: 'Outcome of a claim: exists only once the claim is settled, after the fraud decision (a severe leakage trap)',
    source: 'claim_settlements (feature_timestamp = settled_at)',
    ttl: null,
    postOutcome: true,
    features: [
      f('settlement_amount', 'FLOAT', 'amount paid out, EUR'),
      f('investigation_flag', 'BOOL', '1 when the special investigations unit opened a case'),
    ],
  },
  {
    name: 'machine_utilization',
    entity: 'machine',
    description: "A rental machine's state and the fleet's utilization, from the supergraph's own rental events",
    source: 'outbox topics rental.machine_status and rental.fleet_summary',
    ttl: 'P30D',
    postOutcome: false,
    features: [
      f('status_code', 'INT', '0 available, 1 reserved, 2 in use'),
      f('busy', 'BOOL', '1 when reserved or in use'),
      f('fleet_utilization', 'FLOAT', 'share of the fleet reserved or in use (0 .. 1)'),
    ],
  },
];

export const viewDefinition = (name: string) => VIEW_DEFINITIONS.find((v) => v.name === name);

export function viewVersion(view: ViewDefinition): string {
  return createHash('sha256').update(JSON.stringify(view)).digest('hex').slice(0, 12);
}

const ttlMsOf = (view: ViewDefinition): number | null => (view.ttl === null ? null : parseDuration(view.ttl));

/** Entity ids by code and codes by id, one dictionary per entity type. */
export class EntityDictionary {
  readonly ids: string[] = [];
  private readonly codes = new Map<string, number>();
  code(id: string): number {
    let code = this.codes.get(id);
    if (code === undefined) {
      code = this.ids.length;
      this.ids.push(id);
      this.codes.set(id, code);
    }
    return code;
  }
  find(id: string): number {
    return this.codes.get(id) ?? -1;
  }
  get size(): number {
    return this.ids.length;
  }
}

/** Columnar view data from row records. */
export function buildView<R>(
  def: ViewDefinition,
  dict: EntityDictionary,
  rows: readonly R[],
  read: (row: R) => { entity: string; ts: number; created: number; values: readonly number[] },
): ViewData {
  const length = rows.length;
  const view: ViewData = {
    name: def.name,
    entity: def.entity,
    features: def.features.map((x) => x.name),
    ttlMs: ttlMsOf(def),
    entityCount: 0,
    length,
    entityCode: new Int32Array(length),
    ts: new Float64Array(length),
    created: new Float64Array(length),
    values: def.features.map(() => new Float64Array(length)),
  };
  rows.forEach((row, i) => {
    const r = read(row);
    view.entityCode[i] = dict.code(r.entity);
    view.ts[i] = r.ts;
    view.created[i] = r.created;
    r.values.forEach((v, j) => (view.values[j]![i] = v));
  });
  view.entityCount = dict.size;
  return view;
}

/** The views of the generated world (everything but the outbox-fed machine view). */
export function worldViews(world: World, dicts: Record<EntityType, EntityDictionary>): ViewData[] {
  // Dictionaries first hold every known entity, so codes do not depend on which views have rows.
  for (const id of world.policyIds) dicts.policy.code(id);
  for (const id of world.claimIds) dicts.claim.code(id);
  const def = (name: string) => {
    const d = viewDefinition(name);
    if (!d) throw new Error(`no view ${name}`);
    return d;
  };
  const settled = world.claims.filter((c) => c.settledAt < Date.UTC(2026, 0, 1));
  const views = [
    buildView(def('policy_profile'), dicts.policy, world.policyVersions, (v) => ({
      entity: v.policyId,
      ts: v.featureTs,
      created: v.createdTs,
      values: [v.driverAge, v.vehicleAgeYears, v.vehicleValue, v.regionRisk, v.noClaimsYears, v.annualPremium, v.riskScore],
    })),
    buildView(def('policy_claims_history'), dicts.policy, world.snapshots, (s) => ({
      entity: s.policyId,
      ts: s.featureTs,
      created: s.createdTs,
      values: [s.claimsCount12m, s.claimsAmount12m, s.openClaims],
    })),
    buildView(def('claim_report'), dicts.claim, world.claimReports, (r) => ({
      entity: r.claimId,
      ts: r.featureTs,
      created: r.createdTs,
      values: [r.reportedAmount, r.reportLagDays, r.policeReport, r.incidentType, r.policyTenureDays],
    })),
    buildView(def('claim_settlement'), dicts.claim, settled, (c) => ({
      entity: c.claimId,
      ts: c.settledAt,
      created: c.settledAt + 2 * 3_600_000,
      values: [c.settlementAmount, c.investigationFlag],
    })),
  ];
  for (const v of views) v.entityCount = dicts[v.entity].size;
  return views;
}
