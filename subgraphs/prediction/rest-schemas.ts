import { z } from 'zod';
import { instant } from '../../platform/rest.js';

/*
 * The documented answers of the prediction REST paths (rest.ts): the OpenAPI document's schemas and,
 * outside production, the check on every answer. A forecast shape is one component, whether it comes
 * alone, in a batch or inside a cold-chain margin.
 */

const minutes = (what: string) => z.number().describe(`${what}, minutes`);
const modelVersion = z.string().describe('Hash of the model artifact that answered');

export const dwellForecast = z
  .strictObject({
    q10_min: minutes('10th percentile of the dwell'),
    q50_min: minutes('Median dwell'),
    q90_min: minutes('90th percentile of the dwell'),
    interval_width_min: minutes('q90_min - q10_min, the width of the 80% prediction interval (rounded to 0.1)'),
    interpretation: z.string().describe('One sentence naming the expected dwell, its interval and the worst-case margin'),
    risk_level: z
      .enum(['low', 'moderate', 'high', 'breach'])
      .describe('By the worst-case margin: breach below 0, high below 45 min, moderate below 120 min, low from 120 min'),
    worst_case_margin_min: minutes('ischaemic_remaining_min - q90_min'),
    model_version: modelVersion,
  })
  .meta({
    id: 'PredictionDwellForecast',
    description: 'Minutes from arrival at the recipient facility to handover; [q10, q90] is a conformally calibrated 80% interval and q10 <= q50 <= q90',
  });

export const travelForecast = z
  .strictObject({
    q10_min: minutes('10th percentile of the transit time'),
    q50_min: minutes('Median transit time'),
    q90_min: minutes('90th percentile of the transit time'),
    interval_width_min: minutes('q90_min - q10_min, the width of the 80% prediction interval (rounded to 0.1)'),
    model_version: modelVersion,
  })
  .meta({
    id: 'PredictionTravelForecast',
    description: 'Corridor transit minutes; [q10, q90] is a conformally calibrated 80% interval and q10 <= q50 <= q90',
  });

export const lockerForecast = z
  .strictObject({
    success_probability: z.number().min(0).max(1).describe('Calibrated probability (0..1) that diverting the handover to the locker succeeds'),
    model_version: modelVersion,
  })
  .meta({ id: 'PredictionLockerForecast' });

const batchOf = <T extends z.ZodType>(item: T) => z.strictObject({ predictions: z.array(item).describe('One per instance, in order') });
export const dwellBatch = batchOf(dwellForecast);
export const travelBatch = batchOf(travelForecast);
export const lockerBatch = batchOf(lockerForecast);

const marginCase = z
  .strictObject({
    total_min: minutes('Travel plus dwell at this quantile'),
    margin_min: minutes('ischaemic_remaining_min - total_min; negative is a breach'),
  })
  .meta({ id: 'PredictionMarginCase' });

export const coldChainMargin = z
  .strictObject({
    ischaemic_remaining_min: minutes('Cold-ischaemia time left, as sent'),
    dwell: dwellForecast,
    travel: travelForecast,
    best: marginCase,
    median: marginCase,
    worst: marginCase,
    worst_case_breach: z.boolean().describe('worst.margin_min < 0'),
  })
  .meta({
    description:
      'Travel and dwell quantiles composed against the ischaemic time left: best with both q10, median with both q50, worst with both q90 ' +
      '(conservative: the sum of two 90th percentiles is at or above the 90th percentile of the sum)',
  });

const modelHead = {
  ready: z.boolean(),
  version: modelVersion,
  trained_at: instant(),
  features: z.number().int().describe('Features the model takes'),
  trees: z.number().int().describe('Boosted trees, all quantiles together'),
};
const share = (what: string) => z.number().min(0).max(1).describe(what);

/** Held-out figures by decile of each of a model's most important inputs, keyed by input name. */
const byDecile = <F extends z.ZodRawShape>(what: string, figures: F) =>
  z
    .record(
      z.string(),
      z.array(
        z.strictObject({
          from: z.number().describe('Lowest value of the input in this group'),
          to: z.number().describe('Highest value of the input in this group'),
          n: z.number().int().describe('Held-out rows in the group'),
          ...figures,
        }),
      ),
    )
    .describe(`${what} by decile of each of the most important inputs (by input name)`);

const quantileModel = z
  .strictObject({
    ...modelHead,
    metrics: z.strictObject({
      coverage_80: share('Share of test outcomes inside [q10, q90] (target 0.80)'),
      mean_width_min: minutes('Mean width of the 80% interval'),
      uncalibrated_coverage_80: share('Coverage of the raw quantile models before the conformal shift'),
      pinball_loss: minutes('Mean pinball loss over q10, q50, q90'),
      baseline_pinball_loss: minutes('The same for the training-set quantiles (a constant forecast)'),
      spec_coverage_80: share('The coverage the specification reports for this model'),
      test_size: z.number().int().describe('Held-out rows the metrics are measured on'),
      coverage_by_decile: byDecile('Coverage', {
        coverage_80: share('Share of the group inside [q10, q90]'),
        mean_width_min: minutes('Mean width of the 80% interval in the group'),
      }),
    }),
    baseline: z.string().describe('The physical baseline the model predicts a ratio to'),
  })
  .meta({ id: 'PredictionQuantileModel', description: 'A quantile model and its held-out (test split) metrics' });

const classifierModel = z
  .strictObject({
    ...modelHead,
    metrics: z.strictObject({
      roc_auc: share('ROC-AUC'),
      brier_score: share('Brier score'),
      baseline_brier_score: share('Brier score of always answering the base rate'),
      calibration_error: share('Expected calibration error (10 bins)'),
      base_rate: share('Share of successful diversions'),
      oracle_roc_auc: share("ROC-AUC of the generator's true probabilities: the ceiling on this data"),
      spec_roc_auc: share('The ROC-AUC the specification reports'),
      test_size: z.number().int().describe('Held-out rows the metrics are measured on'),
      calibration_by_decile: byDecile('Calibration', {
        mean_probability: share('Mean predicted success probability in the group'),
        observed_rate: share('Observed success rate in the group'),
      }),
    }),
  })
  .meta({ id: 'PredictionClassifierModel', description: 'The locker classifier and its held-out (test split) metrics' });

export const predictionHealth = z.strictObject({
  status: z.enum(['ok', 'unavailable']),
  service: z.literal('prediction'),
  version: z.literal('1.0'),
  ready: z.boolean(),
  trained_at: instant(),
  training_seconds: z.number().describe('Wall time of npm run train, seconds'),
  seed: z.number().int().describe('Seed of the generated training data'),
  data: z.string().describe('Where the training data comes from'),
  models: z.strictObject({ dwell: quantileModel, travel: quantileModel, locker: classifierModel }),
});

export type DwellForecast = z.infer<typeof dwellForecast>;
export type TravelForecast = z.infer<typeof travelForecast>;
export type LockerForecast = z.infer<typeof lockerForecast>;
export type ColdChainMargin = z.infer<typeof coldChainMargin>;
export type PredictionHealth = z.infer<typeof predictionHealth>;
export type QuantileModel = z.infer<typeof quantileModel>;
export type ClassifierModel = z.infer<typeof classifierModel>;
