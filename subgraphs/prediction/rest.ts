import { defineRoute, type RestRoute } from '../../platform/rest.js';
import { toGraphQLInput } from './features.js';
import { coldChainBody, dwellBatchBody, dwellBody, lockerBatchBody, lockerBody, travelBatchBody, travelBody } from './inputs.js';
import {
  coldChainMargin,
  dwellBatch,
  dwellForecast,
  lockerBatch,
  lockerForecast,
  predictionHealth,
  travelBatch,
  travelForecast,
  type ClassifierModel,
  type ColdChainMargin,
  type DwellForecast,
  type LockerForecast,
  type PredictionHealth,
  type QuantileModel,
  type TravelForecast,
} from './rest-schemas.js';
import type {
  PredictColdChainQuery,
  PredictDwellBatchQuery,
  PredictDwellQuery,
  PredictLockerBatchQuery,
  PredictLockerQuery,
  PredictTravelTimeBatchQuery,
  PredictTravelTimeQuery,
  PredictionHealthQuery,
} from './operation-types.js';

/*
 * The documented REST paths of the prediction service (under /prediction), each run as a GraphQL
 * operation through the gateway. Bodies carry the features by their snake_case names with integer codes
 * and 0/1 flags, as the specification's clients send them; answers are snake_case, typed by their
 * documented schemas (rest-schemas.ts).
 */

type Features = Record<string, number>;

type DwellData = PredictDwellQuery['predictDwell'];
type TransitData = PredictTravelTimeQuery['predictTravelTime'];
type LockerData = PredictLockerQuery['predictLockerDiversion'];
type QuantileInfoData = PredictionHealthQuery['predictionModels']['dwell'];
type ClassifierInfoData = PredictionHealthQuery['predictionModels']['locker'];
type MarginData = PredictColdChainQuery['coldChainMargin']['best'];

const DWELL = 'q10Minutes q50Minutes q90Minutes intervalWidthMinutes worstCaseMarginMinutes risk interpretation modelVersion';
const TRANSIT = 'q10Minutes q50Minutes q90Minutes intervalWidthMinutes modelVersion';
const LOCKER = 'successProbability modelVersion';
const MARGIN = 'totalMinutes marginMinutes';
const QUANTILE_INFO = `version featureCount trees coverage80 meanWidthMinutes uncalibratedCoverage80 pinballLoss
  baselinePinballLoss specCoverage80 testSize baseline
  coverageByDecile { feature groups { from to size coverage80 meanWidthMinutes } }`;
const CLASSIFIER_INFO = `version featureCount trees rocAuc brierScore baselineBrierScore calibrationError baseRate
  oracleRocAuc specRocAuc testSize calibrationByDecile { feature groups { from to size meanProbability observedRate } }`;

const lower = <S extends string>(s: S) => s.toLowerCase() as Lowercase<S>;

const dwellBodyOf = (d: DwellData): DwellForecast => ({
  q10_min: d.q10Minutes,
  q50_min: d.q50Minutes,
  q90_min: d.q90Minutes,
  interval_width_min: d.intervalWidthMinutes,
  interpretation: d.interpretation,
  risk_level: lower(d.risk),
  worst_case_margin_min: d.worstCaseMarginMinutes,
  model_version: d.modelVersion,
});
const transitBodyOf = (t: TransitData): TravelForecast => ({
  q10_min: t.q10Minutes,
  q50_min: t.q50Minutes,
  q90_min: t.q90Minutes,
  interval_width_min: t.intervalWidthMinutes,
  model_version: t.modelVersion,
});
const lockerBodyOf = (l: LockerData): LockerForecast => ({ success_probability: l.successProbability, model_version: l.modelVersion });
const marginBodyOf = (m: MarginData): ColdChainMargin['best'] => ({ total_min: m.totalMinutes, margin_min: m.marginMinutes });

const quantileInfoBody = (i: QuantileInfoData, trainedAt: string): QuantileModel => ({
  ready: true,
  version: i.version,
  trained_at: trainedAt,
  features: i.featureCount,
  trees: i.trees,
  metrics: {
    coverage_80: i.coverage80,
    mean_width_min: i.meanWidthMinutes,
    uncalibrated_coverage_80: i.uncalibratedCoverage80,
    pinball_loss: i.pinballLoss,
    baseline_pinball_loss: i.baselinePinballLoss,
    spec_coverage_80: i.specCoverage80,
    test_size: i.testSize,
    coverage_by_decile: Object.fromEntries(
      i.coverageByDecile.map((c) => [
        c.feature,
        c.groups.map((g) => ({ from: g.from, to: g.to, n: g.size, coverage_80: g.coverage80, mean_width_min: g.meanWidthMinutes })),
      ]),
    ),
  },
  baseline: i.baseline,
});
const classifierInfoBody = (i: ClassifierInfoData, trainedAt: string): ClassifierModel => ({
  ready: true,
  version: i.version,
  trained_at: trainedAt,
  features: i.featureCount,
  trees: i.trees,
  metrics: {
    roc_auc: i.rocAuc,
    brier_score: i.brierScore,
    baseline_brier_score: i.baselineBrierScore,
    calibration_error: i.calibrationError,
    base_rate: i.baseRate,
    oracle_roc_auc: i.oracleRocAuc,
    spec_roc_auc: i.specRocAuc,
    test_size: i.testSize,
    calibration_by_decile: Object.fromEntries(
      i.calibrationByDecile.map((c) => [
        c.feature,
        c.groups.map((g) => ({ from: g.from, to: g.to, n: g.size, mean_probability: g.meanProbability, observed_rate: g.observedRate })),
      ]),
    ),
  },
});

export const predictionRoutes: readonly RestRoute[] = [
  defineRoute<undefined, undefined, undefined, PredictionHealthQuery>({
    method: 'GET',
    path: '/health',
    summary: 'Model readiness, versions, training time and held-out metrics',
    operation: `query PredictionHealth { predictionModels { ready seed trainedAt trainingSeconds data
      dwell { ${QUANTILE_INFO} } travel { ${QUANTILE_INFO} } locker { ${CLASSIFIER_INFO} } } }`,
    variables: () => ({}),
    result: ({ predictionModels: m }): PredictionHealth => ({
      status: m.ready ? 'ok' : 'unavailable',
      service: 'prediction',
      version: '1.0',
      ready: m.ready,
      trained_at: m.trainedAt,
      training_seconds: m.trainingSeconds,
      seed: m.seed,
      data: m.data,
      models: {
        dwell: quantileInfoBody(m.dwell, m.trainedAt),
        travel: quantileInfoBody(m.travel, m.trainedAt),
        locker: classifierInfoBody(m.locker, m.trainedAt),
      },
    }),
    response: predictionHealth,
  }),
  defineRoute<Features, undefined, undefined, PredictDwellQuery>({
    method: 'POST',
    path: '/predict/dwell_advanced',
    summary: 'Dwell-time quantiles (22 features) with a risk interpretation',
    operation: `query PredictDwell($input: DwellInput!) { predictDwell(input: $input) { ${DWELL} } }`,
    body: dwellBody,
    variables: ({ body }) => ({ input: toGraphQLInput('dwell', body) }),
    result: (d) => dwellBodyOf(d.predictDwell),
    response: dwellForecast,
  }),
  defineRoute<{ instances: Features[] }, undefined, undefined, PredictDwellBatchQuery>({
    method: 'POST',
    path: '/predict/dwell_advanced/batch',
    summary: 'Dwell-time quantiles for 1..1000 feature sets',
    operation: `query PredictDwellBatch($inputs: [DwellInput!]!) { predictDwellBatch(inputs: $inputs) { ${DWELL} } }`,
    body: dwellBatchBody,
    variables: ({ body }) => ({ inputs: body.instances.map((f) => toGraphQLInput('dwell', f)) }),
    result: (d) => ({ predictions: d.predictDwellBatch.map(dwellBodyOf) }),
    response: dwellBatch,
  }),
  defineRoute<Features, undefined, undefined, PredictTravelTimeQuery>({
    method: 'POST',
    path: '/predict/travel_time',
    summary: 'Corridor travel-time quantiles (12 features)',
    operation: `query PredictTravelTime($input: TravelInput!) { predictTravelTime(input: $input) { ${TRANSIT} } }`,
    body: travelBody,
    variables: ({ body }) => ({ input: toGraphQLInput('travel', body) }),
    result: (d) => transitBodyOf(d.predictTravelTime),
    response: travelForecast,
  }),
  defineRoute<{ instances: Features[] }, undefined, undefined, PredictTravelTimeBatchQuery>({
    method: 'POST',
    path: '/predict/travel_time/batch',
    summary: 'Travel-time quantiles for 1..1000 feature sets',
    operation: `query PredictTravelTimeBatch($inputs: [TravelInput!]!) { predictTravelTimeBatch(inputs: $inputs) { ${TRANSIT} } }`,
    body: travelBatchBody,
    variables: ({ body }) => ({ inputs: body.instances.map((f) => toGraphQLInput('travel', f)) }),
    result: (d) => ({ predictions: d.predictTravelTimeBatch.map(transitBodyOf) }),
    response: travelBatch,
  }),
  defineRoute<Features, undefined, undefined, PredictLockerQuery>({
    method: 'POST',
    path: '/predict/locker_advanced',
    summary: 'Locker-diversion success probability (10 features)',
    operation: `query PredictLocker($input: LockerInput!) { predictLockerDiversion(input: $input) { ${LOCKER} } }`,
    body: lockerBody,
    variables: ({ body }) => ({ input: toGraphQLInput('locker', body) }),
    result: (d) => lockerBodyOf(d.predictLockerDiversion),
    response: lockerForecast,
  }),
  defineRoute<{ instances: Features[] }, undefined, undefined, PredictLockerBatchQuery>({
    method: 'POST',
    path: '/predict/locker_advanced/batch',
    summary: 'Locker-diversion probabilities for 1..1000 feature sets',
    operation: `query PredictLockerBatch($inputs: [LockerInput!]!) { predictLockerDiversionBatch(inputs: $inputs) { ${LOCKER} } }`,
    body: lockerBatchBody,
    variables: ({ body }) => ({ inputs: body.instances.map((f) => toGraphQLInput('locker', f)) }),
    result: (d) => ({ predictions: d.predictLockerDiversionBatch.map(lockerBodyOf) }),
    response: lockerBatch,
  }),
  defineRoute<{ dwell: Features; travel: Features; ischaemic_remaining_min: number }, undefined, undefined, PredictColdChainQuery>({
    method: 'POST',
    path: '/predict/cold_chain_margin',
    summary: 'Dwell and travel quantiles composed into best / median / worst cold-chain margins',
    operation: `query PredictColdChain($dwell: DwellInput!, $travel: TravelInput!, $remaining: Float!) {
      coldChainMargin(dwell: $dwell, travel: $travel, ischaemicRemainingMin: $remaining) {
        ischaemicRemainingMin dwell { ${DWELL} } travel { ${TRANSIT} }
        best { ${MARGIN} } median { ${MARGIN} } worst { ${MARGIN} } worstCaseBreach } }`,
    body: coldChainBody,
    variables: ({ body }) => ({
      dwell: toGraphQLInput('dwell', body.dwell),
      travel: toGraphQLInput('travel', body.travel),
      remaining: body.ischaemic_remaining_min,
    }),
    result: ({ coldChainMargin: c }): ColdChainMargin => ({
      ischaemic_remaining_min: c.ischaemicRemainingMin,
      dwell: dwellBodyOf(c.dwell),
      travel: transitBodyOf(c.travel),
      best: marginBodyOf(c.best),
      median: marginBodyOf(c.median),
      worst: marginBodyOf(c.worst),
      worst_case_breach: c.worstCaseBreach,
    }),
    response: coldChainMargin,
  }),
];
