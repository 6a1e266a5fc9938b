import { z } from 'zod';
import { domainError } from '../../platform/errors.js';
import { defineRoute, oneOf, type RestRoute } from '../../platform/rest.js';
import { instantProblem } from '../../platform/scalars.js';
import { text } from '../../platform/validate.js';
import { chunked, csvCell, parseEntityCsv } from './csv.js';
import { MAX_ENTITY_ROWS, MAX_LABEL_SET_ROWS, MAX_VIEWS } from './inputs.js';
import {
  featuresFrame,
  featuresHealth,
  featuresImportance,
  featuresLeakageAudit,
  featuresMaterialization,
  featuresOnlineClaim,
  featuresOnlinePolicy,
  featuresViews,
  type FeaturesFrame,
  type FeaturesHealth,
  type FeaturesImportance,
  type FeaturesLeakageAudit,
  type FeaturesMaterialization,
  type FeaturesOnlineClaim,
  type FeaturesViews,
} from './rest-schemas.js';
import type {
  FeatureImportanceQuery,
  FeatureViewsQuery,
  FeaturesHealthQuery,
  LeakageAuditQuery,
  MaterializeMutation,
  OnlineClaimQuery,
  OnlinePolicyQuery,
  PitTrainingQuery,
} from './operation-types.js';

/*
 * The documented REST paths of the feature service (under /features), each run as a GraphQL operation
 * through the gateway; answers are snake_case, typed by their documented schemas (rest-schemas.ts).
 * POST /pit-training also takes text/csv and answers CSV by Accept; a frame is written as a stream in both
 * representations.
 */

type FrameData = PitTrainingQuery['pitTraining'];
type OnlineData = NonNullable<OnlinePolicyQuery['onlinePolicyFeatures']>;
type MaterializationData = MaterializeMutation['materialize'];
const lower = <S extends string>(s: S) => s.toLowerCase() as Lowercase<S>;

const timestamp = text().superRefine((value, ctx) => {
  const problem = instantProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
const models = z.enum(['underwriting', 'pricing', 'fraud']);
const engines = z.enum(['duckdb', 'typescript', 'both']);
const availabilities = z.enum(['as_known', 'event_time']);
const views = z.array(text()).max(MAX_VIEWS, `must name at most ${MAX_VIEWS} views`);

const entityRow = z.object({
  policy_id: text().nullish(),
  claim_id: text().nullish(),
  machine_id: text().nullish(),
  event_timestamp: timestamp,
  label: z.number().nullish(),
});

const pitBody = z.object({
  entities: z.array(entityRow).max(MAX_ENTITY_ROWS, `must hold at most ${MAX_ENTITY_ROWS} rows`).optional(),
  label_set: models.optional(),
  views: views.optional(),
  ttl: text().optional(),
  engine: engines.optional(),
  availability: availabilities.optional(),
  from: timestamp.optional(),
  to: timestamp.optional(),
  limit: z.number().int().min(1).max(MAX_LABEL_SET_ROWS).optional(),
});
type PitBody = z.infer<typeof pitBody>;

/** Query parameters of POST /pit-training (for CSV bodies; a JSON body's own fields win). */
const pitQuery = z.object({
  views: text().optional(),
  engine: engines.optional(),
  availability: availabilities.optional(),
  ttl: text().optional(),
});
type PitQuery = z.infer<typeof pitQuery>;

const FRAME = `engine availability rowCount columns { name view feature type }
  rows { policyId claimId machineId eventTimestamp label values }
  matches { view matched unmatched } runs { engine milliseconds } comparison { cellsCompared mismatches examples }`;

/** Key columns shown: those any row carries (a policy-only request gets no claim_id column). */
function keyColumns(d: FrameData) {
  const keys: { name: string; get: (r: FrameData['rows'][number]) => string | number | null }[] = [];
  if (d.rows.some((r) => r.policyId !== null)) keys.push({ name: 'policy_id', get: (r) => r.policyId });
  if (d.rows.some((r) => r.claimId !== null)) keys.push({ name: 'claim_id', get: (r) => r.claimId });
  if (d.rows.some((r) => r.machineId !== null)) keys.push({ name: 'machine_id', get: (r) => r.machineId });
  keys.push({ name: 'event_timestamp', get: (r) => r.eventTimestamp });
  if (d.rows.some((r) => r.label !== null)) keys.push({ name: 'label', get: (r) => r.label });
  return keys;
}

const ROWS_PER_CHUNK = 500;

function frameCsv(d: FrameData) {
  const keys = keyColumns(d);
  return chunked(function* () {
    yield `${[...keys.map((k) => k.name), ...d.columns.map((c) => c.name)].map(csvCell).join(',')}\r\n`;
    for (let i = 0; i < d.rows.length; i += ROWS_PER_CHUNK) {
      let out = '';
      for (const r of d.rows.slice(i, i + ROWS_PER_CHUNK)) out += `${[...keys.map((k) => csvCell(k.get(r))), ...r.values.map(csvCell)].join(',')}\r\n`;
      yield out;
    }
  });
}

/** The JSON answer's fields before its rows. */
const frameHead = (d: FrameData): Omit<FeaturesFrame, 'rows'> => ({
  engine: lower(d.engine),
  availability: lower(d.availability),
  row_count: d.rowCount,
  columns: d.columns.map((c) => c.name),
  column_types: Object.fromEntries(d.columns.map((c) => [c.name, lower(c.type)])),
  matches: Object.fromEntries(d.matches.map((m) => [m.view, { matched: m.matched, unmatched: m.unmatched }])),
  // A run is one engine's; BOTH names a request, never a run.
  runs: d.runs.map((r) => ({ engine: oneOf(lower(r.engine), ['duckdb', 'typescript'], 'runs.engine'), milliseconds: r.milliseconds })),
  comparison: d.comparison && { cells_compared: d.comparison.cellsCompared, mismatches: d.comparison.mismatches, examples: d.comparison.examples },
});

/** One JSON row: the key columns shown, then every feature column by name. */
function frameRow(d: FrameData) {
  const keys = keyColumns(d);
  return (r: FrameData['rows'][number]) => {
    const row: Record<string, string | number | null> = {};
    for (const k of keys) row[k.name] = k.get(r);
    d.columns.forEach((c, j) => (row[c.name] = r.values[j] ?? null));
    return row;
  };
}

/** The JSON answer as one value (what the stream below writes, chunk by chunk). */
const frameBody = (d: FrameData) => ({ ...frameHead(d), rows: d.rows.map(frameRow(d)) });

function frameJson(d: FrameData) {
  const row = frameRow(d);
  return chunked(function* () {
    yield `${JSON.stringify(frameHead(d)).slice(0, -1)},"rows":[`;
    for (let i = 0; i < d.rows.length; i += ROWS_PER_CHUNK) {
      const part = d.rows.slice(i, i + ROWS_PER_CHUNK).map((r) => JSON.stringify(row(r)));
      yield `${i > 0 ? ',' : ''}${part.join(',')}`;
    }
    yield ']}';
  });
}

/** CSV when Accept names text/csv ahead of (or without) JSON. */
function wantsCsv(accept: string | undefined): boolean {
  if (!accept) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  const csv = types.indexOf('text/csv');
  const json = types.findIndex((t) => t === 'application/json' || t === '*/*' || t === 'application/*');
  return csv >= 0 && (json < 0 || csv < json);
}

const ONLINE = 'entity id values { column value } views { view version materializationId materializedAt asOf featureTimestamp }';

/** The fields of an online answer besides its id. */
const onlineBody = (o: OnlineData): Omit<FeaturesOnlineClaim, 'claim_id'> => ({
  features: Object.fromEntries(o.values.map((v) => [v.column, v.value])),
  materialized_at:
    o.views
      .map((v) => v.materializedAt)
      .sort()
      .at(-1) ?? null,
  views: o.views.map((v) => ({
    view: v.view,
    version: v.version,
    materialization_id: v.materializationId,
    materialized_at: v.materializedAt,
    as_of: v.asOf,
    feature_timestamp: v.featureTimestamp,
  })),
});

const MATERIALIZATION = 'id asOf watermark rowsWritten views { view version rowsWritten watermark } onlineStore materializedAt milliseconds';
const materializationBody = (m: MaterializationData): FeaturesMaterialization => ({
  materialization_id: m.id,
  as_of: m.asOf,
  watermark: m.watermark,
  rows_written: m.rowsWritten,
  views: m.views.map((v) => ({ view: v.view, version: v.version, rows_written: v.rowsWritten, watermark: v.watermark })),
  online_store: oneOf(m.onlineStore, ['database', 'redis'], 'online_store'),
  materialized_at: m.materializedAt,
  milliseconds: m.milliseconds,
});

export const featuresRoutes: readonly RestRoute[] = [
  defineRoute<undefined, undefined, undefined, FeaturesHealthQuery>({
    method: 'GET',
    path: '/health',
    summary: 'Uptime and dependency checks (database, online store, DuckDB)',
    operation: `query FeaturesHealth { featureStoreHealth { ok uptimeSeconds seed policies claims onlineStore checks { name ok detail milliseconds } } }`,
    variables: () => ({}),
    result: ({ featureStoreHealth: h }): FeaturesHealth => ({
      status: h.ok ? 'ok' : 'degraded',
      service: 'features',
      version: '1.0',
      uptime_s: h.uptimeSeconds,
      online_store: oneOf(h.onlineStore, ['database', 'redis'], 'online_store'),
      world: { seed: h.seed, policies: h.policies, claims: h.claims },
      // The three checks the service runs, by name.
      checks: Object.fromEntries(h.checks.map((c) => [c.name, { ok: c.ok, detail: c.detail, ms: c.milliseconds }])) as FeaturesHealth['checks'],
    }),
    response: featuresHealth,
  }),
  defineRoute<undefined, undefined, { policy_id: string }, OnlinePolicyQuery>({
    method: 'GET',
    path: '/online/policy/:policy_id',
    summary: 'Online features of one policy',
    operation: `query OnlinePolicy($id: ID!) { onlinePolicyFeatures(id: $id) { ${ONLINE} } }`,
    params: z.object({ policy_id: text() }),
    variables: ({ params }) => ({ id: params.policy_id }),
    fieldNames: { id: 'policy_id' },
    result: (d) => {
      if (!d.onlinePolicyFeatures) throw domainError('NOT_FOUND', 'No online features for this policy (unknown, or not materialized)');
      return { policy_id: d.onlinePolicyFeatures.id, ...onlineBody(d.onlinePolicyFeatures) };
    },
    response: featuresOnlinePolicy,
    errors: ['NOT_FOUND'],
  }),
  defineRoute<undefined, undefined, { claim_id: string }, OnlineClaimQuery>({
    method: 'GET',
    path: '/online/claim/:claim_id',
    summary: 'Online features of one claim',
    operation: `query OnlineClaim($id: ID!) { onlineClaimFeatures(id: $id) { ${ONLINE} } }`,
    params: z.object({ claim_id: text() }),
    variables: ({ params }) => ({ id: params.claim_id }),
    fieldNames: { id: 'claim_id' },
    result: (d) => {
      if (!d.onlineClaimFeatures) throw domainError('NOT_FOUND', 'No online features for this claim (unknown, or not materialized)');
      return { claim_id: d.onlineClaimFeatures.id, ...onlineBody(d.onlineClaimFeatures) };
    },
    response: featuresOnlineClaim,
    errors: ['NOT_FOUND'],
  }),
  defineRoute<{ as_of?: string; views?: string[]; engine?: 'duckdb' | 'typescript' | 'both' }, undefined, undefined, MaterializeMutation>({
    method: 'POST',
    path: '/offline',
    summary: 'Materializes feature values as of a time into the online store',
    operation: `mutation Materialize($input: MaterializeInput!) { materialize(input: $input) { ${MATERIALIZATION} } }`,
    body: z.object({ as_of: timestamp.optional(), views: views.optional(), engine: engines.optional() }),
    variables: ({ body }) => ({ input: { asOf: body.as_of, views: body.views, engine: body.engine?.toUpperCase() } }),
    fieldNames: { asOf: 'as_of' },
    result: (d) => materializationBody(d.materialize),
    response: featuresMaterialization,
  }),
  defineRoute<PitBody, PitQuery, undefined, PitTrainingQuery>({
    method: 'POST',
    path: '/pit-training',
    summary: 'Point-in-time training frame for entity rows (JSON or CSV) or a label set; JSON or CSV answer',
    operation: `query PitTraining($input: PitTrainingInput!) { pitTraining(input: $input) { ${FRAME} } }`,
    body: pitBody,
    query: pitQuery,
    textBodies: { 'text/csv': parseEntityCsv },
    variables: ({ body, query }) => ({
      input: {
        entities: body.entities?.map((e) => ({
          policyId: e.policy_id,
          claimId: e.claim_id,
          machineId: e.machine_id,
          eventTimestamp: e.event_timestamp,
          label: e.label,
        })),
        labelSet: body.label_set?.toUpperCase(),
        views: body.views ?? query.views?.split(',').map((v) => v.trim()),
        ttl: body.ttl ?? query.ttl,
        engine: (body.engine ?? query.engine)?.toUpperCase(),
        availability: (body.availability ?? query.availability)?.toUpperCase(),
        from: body.from,
        to: body.to,
        limit: body.limit,
      },
    }),
    fieldNames: { labelSet: 'label_set' },
    result: (d) => frameBody(d.pitTraining),
    response: featuresFrame,
    representations: { 'text/csv': 'the key columns present, then the feature columns, one line per entity row' },
    represent: (d, accept) =>
      wantsCsv(accept)
        ? { contentType: 'text/csv; charset=utf-8', body: frameCsv(d.pitTraining) }
        : { contentType: 'application/json; charset=utf-8', body: frameJson(d.pitTraining) },
  }),
  defineRoute<{ label_set: 'underwriting' | 'pricing' | 'fraud'; views?: string[]; test_from?: string }, undefined, undefined, LeakageAuditQuery>({
    method: 'POST',
    path: '/leakage-audit',
    summary: 'Temporal leakage findings of a label set, ranked by severity, and the AUC an unguarded join inflates',
    operation: `query LeakageAudit($input: LeakageAuditInput!) { leakageAudit(input: $input) { labelSet labelRows rowsWithFindings
      findings { view feature column severity rows rowsWithoutPitValue medianLeadHours separationGain }
      evaluation { metric pointInTime unguardedOffline unguardedInProduction inflation unavailableReason trainRows testRows testFrom }
      availability { asKnown eventTime difference views { view rows eventTime difference } } } }`,
    body: z.object({ label_set: models, views: views.optional(), test_from: timestamp.optional() }),
    variables: ({ body }) => ({ input: { labelSet: body.label_set.toUpperCase(), views: body.views, testFrom: body.test_from } }),
    fieldNames: { labelSet: 'label_set', testFrom: 'test_from' },
    result: ({ leakageAudit: a }): FeaturesLeakageAudit => ({
      label_set: lower(a.labelSet),
      label_rows: a.labelRows,
      rows_with_findings: a.rowsWithFindings,
      findings: a.findings.map((f) => ({
        view: f.view,
        feature: f.feature,
        column: f.column,
        severity: lower(f.severity),
        rows: f.rows,
        rows_without_pit_value: f.rowsWithoutPitValue,
        median_lead_hours: f.medianLeadHours,
        separation_gain: f.separationGain,
      })),
      evaluation: {
        metric: oneOf(a.evaluation.metric, ['roc_auc', 'r2_log1p'], 'evaluation.metric'),
        point_in_time: a.evaluation.pointInTime,
        unguarded_offline: a.evaluation.unguardedOffline,
        unguarded_in_production: a.evaluation.unguardedInProduction,
        inflation: a.evaluation.inflation,
        unavailable_reason: a.evaluation.unavailableReason,
        train_rows: a.evaluation.trainRows,
        test_rows: a.evaluation.testRows,
        test_from: a.evaluation.testFrom,
      },
      availability: {
        as_known: a.availability.asKnown,
        event_time: a.availability.eventTime,
        difference: a.availability.difference,
        views: a.availability.views.map((v) => ({ view: v.view, rows: v.rows, event_time: v.eventTime, difference: v.difference })),
      },
    }),
    response: featuresLeakageAudit,
  }),
  defineRoute<undefined, undefined, undefined, FeatureImportanceQuery>({
    method: 'GET',
    path: '/feature-importance',
    summary: 'Permutation importance of the underwriting, pricing and fraud models (point-in-time frames)',
    operation: `query FeatureImportance { featureImportance { model metric heldOut unavailableReason trainRows testRows testFrom features { column importance rank } } }`,
    variables: () => ({}),
    result: ({ featureImportance }): FeaturesImportance => ({
      models: featureImportance.map((m) => ({
        model: lower(m.model),
        metric: oneOf(m.metric, ['roc_auc', 'r2_log1p'], 'metric'),
        held_out: m.heldOut,
        unavailable_reason: m.unavailableReason,
        train_rows: m.trainRows,
        test_rows: m.testRows,
        test_from: m.testFrom,
        features: m.features,
      })),
    }),
    response: featuresImportance,
  }),
  defineRoute<undefined, undefined, undefined, FeatureViewsQuery>({
    method: 'GET',
    path: '/views',
    summary: 'The feature registry',
    operation: `query FeatureViews { featureViews { name entity description source ttl version rowCount postOutcome features { name column type description } } }`,
    variables: () => ({}),
    result: ({ featureViews }): FeaturesViews => ({
      views: featureViews.map((v) => ({
        name: v.name,
        entity: lower(v.entity),
        description: v.description,
        source: v.source,
        ttl: v.ttl,
        version: v.version,
        row_count: v.rowCount,
        post_outcome: v.postOutcome,
        features: v.features.map((f) => ({ name: f.name, column: f.column, type: lower(f.type), description: f.description })),
      })),
    }),
    response: featuresViews,
  }),
];
