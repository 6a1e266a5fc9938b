import { z } from 'zod';
import { instant } from '../../platform/rest.js';

/*
 * The documented answers of the feature REST paths (rest.ts): the OpenAPI document's schemas and, outside
 * production, the check on every answer given as one JSON body. The training frame is written as a stream
 * (JSON or CSV) and so is not checked per answer; test/gateway/rest/openapi.test.ts checks one against the document.
 */

const ms = (what: string) => z.number().describe(`${what}, milliseconds`);
const count = () => z.number().int().min(0);
const model = z.enum(['underwriting', 'pricing', 'fraud']);
const engine = z.enum(['duckdb', 'typescript', 'both']);
const metric = z
  .enum(['roc_auc', 'r2_log1p'])
  .describe('roc_auc for the underwriting and fraud classifiers, r2_log1p (R squared of the log1p claim cost) for pricing');
const featureValue = z.number().nullable();

const check = z.strictObject({ ok: z.boolean(), detail: z.string(), ms: ms('Time the check took') }).meta({ id: 'FeaturesDependencyCheck' });

export const featuresHealth = z.strictObject({
  status: z.enum(['ok', 'degraded']).describe('degraded when a dependency check fails'),
  service: z.literal('features'),
  version: z.literal('1.0'),
  uptime_s: z.number().min(0).describe('Seconds since the feature service started'),
  online_store: z.enum(['database', 'redis']),
  world: z
    .strictObject({
      seed: z.number().int(),
      policies: count(),
      claims: count().nullable().describe('null until the offline store is first used (it is built on demand)'),
    })
    .describe('The generated insurance world'),
  checks: z.strictObject({ database: check, online_store: check, duckdb: check }),
});

const onlineView = z
  .strictObject({
    view: z.string(),
    version: z.string().describe('Hash of the view definition the values were computed under'),
    materialization_id: z.string(),
    materialized_at: instant(),
    as_of: instant().describe('The point in time of the values'),
    feature_timestamp: instant().describe('The feature_timestamp of the row the values came from'),
  })
  .meta({ id: 'FeaturesOnlineViewVersion' });

const onlineFields = {
  features: z.record(z.string(), featureValue).describe('Value by column (view__feature); null where nothing matched'),
  materialized_at: instant().nullable().describe('The newest materialization among the views'),
  views: z.array(onlineView),
};
export const featuresOnlinePolicy = z.strictObject({ policy_id: z.string(), ...onlineFields }).meta({ id: 'FeaturesOnlinePolicy' });
export const featuresOnlineClaim = z.strictObject({ claim_id: z.string(), ...onlineFields }).meta({ id: 'FeaturesOnlineClaim' });

export const featuresMaterialization = z
  .strictObject({
    materialization_id: z.string(),
    as_of: instant().describe('Point in time of the values'),
    watermark: instant().nullable().describe('Newest feature_timestamp among all rows written'),
    rows_written: count(),
    views: z.array(
      z.strictObject({
        view: z.string(),
        version: z.string(),
        rows_written: count(),
        watermark: instant().nullable().describe('Newest feature_timestamp among the rows written'),
      }),
    ),
    online_store: z.enum(['database', 'redis']),
    materialized_at: instant(),
    milliseconds: ms('Time the materialization took'),
  })
  .meta({ id: 'FeaturesMaterialization' });

export const featuresFrame = z
  .strictObject({
    engine,
    availability: z
      .enum(['as_known', 'event_time'])
      .describe('The rule the join applied: as_known (feature and created timestamps at or before the event) or event_time (Feast)'),
    row_count: count(),
    columns: z.array(z.string()).describe('Feature columns (view__feature), in order'),
    column_types: z.record(z.string(), z.enum(['float', 'int', 'bool'])).describe('Type by feature column'),
    matches: z
      .record(z.string(), z.strictObject({ matched: count(), unmatched: count() }))
      .describe('By view: entity rows that found a feature row, and those left null'),
    runs: z.array(z.strictObject({ engine: z.enum(['duckdb', 'typescript']), milliseconds: ms('Join time') })),
    comparison: z
      .strictObject({
        cells_compared: count(),
        mismatches: count(),
        examples: z.array(z.string()).describe('Up to 10 differing cells'),
      })
      .nullable()
      .describe('With engine both: the two engines compared row by row'),
    rows: z.array(
      z
        .object({
          policy_id: z.string().nullable().optional(),
          claim_id: z.string().nullable().optional(),
          machine_id: z.string().nullable().optional(),
          event_timestamp: instant(),
          label: z.number().nullable().optional(),
        })
        .catchall(featureValue)
        .describe('The key columns any row carries, event_timestamp, label when any row has one, then each feature column (null where nothing matched)'),
    ),
  })
  .meta({ id: 'FeaturesTrainingFrame', description: 'A point-in-time training frame: every entity row, each feature as of its event_timestamp' });

export const featuresLeakageAudit = z.strictObject({
  label_set: model,
  label_rows: count(),
  rows_with_findings: count(),
  findings: z
    .array(
      z.strictObject({
        view: z.string(),
        feature: z.string(),
        column: z.string(),
        severity: z.enum(['severe', 'mild']).describe('severe: the value only exists after the event (or a post-outcome view)'),
        rows: count().describe("Label rows where the unguarded join's row follows the event and has another value"),
        rows_without_pit_value: count().describe('Of those, rows where the point-in-time join has no value at all'),
        median_lead_hours: z.number().describe('Median hours by which the leaked row follows the event'),
        separation_gain: z
          .number()
          .nullable()
          .describe('|AUC - 0.5| of the feature alone, unguarded minus point in time; null when the label set holds one class only'),
      }),
    )
    .describe('Ranked severe first, then by separation gain, then by rows'),
  evaluation: z.strictObject({
    metric,
    point_in_time: z.number().nullable().describe('Trained and scored on point-in-time frames (what production achieves); null with unavailable_reason'),
    unguarded_offline: z
      .number()
      .nullable()
      .describe('Trained and scored on unguarded frames (what an unguarded offline evaluation reports); null with unavailable_reason'),
    unguarded_in_production: z
      .number()
      .nullable()
      .describe('Trained unguarded, scored on point-in-time frames (what the unguarded model really achieves); null with unavailable_reason'),
    inflation: z.number().nullable().describe('unguarded_offline - point_in_time; null with unavailable_reason'),
    unavailable_reason: z
      .string()
      .nullable()
      .describe('Why the metrics are null: a split with one class only, or with every label equal (null when they stand)'),
    train_rows: count(),
    test_rows: count(),
    test_from: instant().describe('Start of the out-of-time test period'),
  }),
  availability: z
    .strictObject({
      as_known: z.number().nullable().describe('The point-in-time metric with every view joined as known (the default rule)'),
      event_time: z.number().nullable().describe("The same with every view joined by event time (Feast's rule)"),
      difference: z.number().nullable().describe('event_time - as_known'),
      views: z.array(
        z.strictObject({
          view: z.string(),
          rows: count().describe("Label rows where the view's values differ between the two rules"),
          event_time: z.number().nullable().describe('The metric with this view joined by event time, the others as known'),
          difference: z.number().nullable().describe('event_time - as_known'),
        }),
      ),
    })
    .describe('What the availability rule changes, overall and view by view (nulls with evaluation.unavailable_reason)'),
});

export const featuresImportance = z.strictObject({
  models: z.array(
    z.strictObject({
      model,
      metric,
      held_out: z.number().nullable().describe('The held-out metric on the out-of-time test period; null with unavailable_reason'),
      unavailable_reason: z
        .string()
        .nullable()
        .describe('Why held_out and the importances are null: a split empty, with one class only or every label equal (null when they stand)'),
      train_rows: count(),
      test_rows: count(),
      test_from: instant(),
      features: z.array(
        z.strictObject({
          column: z.string(),
          importance: z.number().nullable().describe('Held-out metric drop when the column is permuted (mean of 3 permutations); null with unavailable_reason'),
          rank: z.number().int().min(1),
        }),
      ),
    }),
  ),
});

export const featuresViews = z.strictObject({
  views: z.array(
    z.strictObject({
      name: z.string(),
      entity: z.enum(['policy', 'claim', 'machine']),
      description: z.string(),
      source: z.string(),
      ttl: z.string().nullable().describe('ISO 8601 duration; null when rows never expire'),
      version: z.string().describe('Hash of the definition'),
      row_count: count().describe('Offline rows of the view'),
      post_outcome: z.boolean().describe('Rows only exist after the outcome they would predict (a planted leakage trap)'),
      features: z.array(
        z.strictObject({
          name: z.string(),
          column: z.string().describe('The frame column: view__feature'),
          type: z.enum(['float', 'int', 'bool']),
          description: z.string(),
        }),
      ),
    }),
  ),
});

export type FeaturesHealth = z.infer<typeof featuresHealth>;
export type FeaturesOnlineClaim = z.infer<typeof featuresOnlineClaim>;
export type FeaturesMaterialization = z.infer<typeof featuresMaterialization>;
export type FeaturesFrame = z.infer<typeof featuresFrame>;
export type FeaturesLeakageAudit = z.infer<typeof featuresLeakageAudit>;
export type FeaturesImportance = z.infer<typeof featuresImportance>;
export type FeaturesViews = z.infer<typeof featuresViews>;
