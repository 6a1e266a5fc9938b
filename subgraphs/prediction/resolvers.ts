import type { GraphQLResolverMap } from '@apollo/subgraph/dist/schema-helper/index.js';
import type { z } from 'zod';
import type { FieldProblem } from '../../platform/errors.js';
import { DateTimeScalar, parseInstant } from '../../platform/scalars.js';
import { checkInput, invalidInput, issuesAt, parseInput } from '../../platform/validate.js';
import { BASELINES } from './baseline.js';
import { MODEL_FEATURES } from './features.js';
import { composeColdChain, deliveryTravelFeatures, readDwell } from './forecasts.js';
import {
  dwellBatch,
  dwellInput,
  ischaemicRemaining,
  lockerBatch,
  lockerInput,
  travelBatch,
  travelInput,
} from './inputs.js';
import { mapInSlices } from '../../platform/slices.js';
import type { QuantileTriple } from './metrics.js';
import type { ModelSet } from './model.js';

export interface PredictionContext {
  models: ModelSet;
}

/** A forecast as the resolvers pass it on: the quantiles plus what the type shows besides. */
interface TransitView extends QuantileTriple {
  version: string;
  departAt: Date | null;
}

/** The Booking fields this subgraph receives from the rental subgraph (a representation). */
interface BookingRepresentation {
  id: string;
  deliveryDistanceKm?: number;
  deliveryDepartAt?: string | Date;
}

function dwellView(models: ModelSet, record: Record<string, number>) {
  const q = models.dwell.predict(record);
  return { ...q, ...readDwell(q, record['ischaemic_remaining_min']!), version: models.dwell.version };
}

function transitView(models: ModelSet, record: Record<string, number>, departAt: Date | null = null): TransitView {
  return { ...models.travel.predict(record), version: models.travel.version, departAt };
}

function lockerView(models: ModelSet, record: Record<string, number>) {
  return { successProbability: models.locker.predict(record), version: models.locker.version };
}

/** Validates several arguments at once, so one error lists every bad field. */
function parseArgs<T extends Record<string, unknown>>(checks: { [K in keyof T]: [z.ZodType<T[K]>, unknown] }): T {
  const out = {} as T;
  const problems: FieldProblem[] = [];
  for (const key of Object.keys(checks) as (keyof T & string)[]) {
    const [schema, value] = checks[key];
    const checked = checkInput(schema, value);
    if ('data' in checked) out[key] = checked.data;
    else problems.push(...issuesAt(checked.issues, key));
  }
  if (problems.length > 0) throw invalidInput(problems);
  return out;
}

/**
 * Delivery forecasts by leg (distance, planned departure), per travel model: the forecast is a pure
 * function of the two and the model, so a booking's forecast is computed once per model, not on every
 * read of the ledger. Bounded: the map is dropped whole when full.
 */
const deliveryForecasts = new WeakMap<ModelSet['travel'], Map<string, TransitView>>();
const MAX_KEPT_FORECASTS = 20_000;

function deliveryForecast(models: ModelSet, distanceKm: number, departAt: Date): TransitView {
  let kept = deliveryForecasts.get(models.travel);
  if (!kept) deliveryForecasts.set(models.travel, (kept = new Map()));
  const key = `${distanceKm}|${departAt.getTime()}`;
  const hit = kept.get(key);
  if (hit) return hit;
  const view = Object.freeze(transitView(models, deliveryTravelFeatures(distanceKm, departAt), departAt));
  if (kept.size >= MAX_KEPT_FORECASTS) kept.clear();
  kept.set(key, view);
  return view;
}

const arrival = (t: TransitView, minutes: number) => (t.departAt ? new Date(t.departAt.getTime() + minutes * 60_000) : null);
const r1 = (x: number) => Math.round(x * 10) / 10;

type Resolvers = Record<string, object>;

export const predictionResolvers = {
  DateTime: DateTimeScalar,
  Query: {
    predictDwell: (_: unknown, args: { input: unknown }, ctx: PredictionContext) => dwellView(ctx.models, parseInput(dwellInput, args.input)),
    predictDwellBatch: (_: unknown, args: { inputs: unknown }, ctx: PredictionContext) =>
      mapInSlices(parseInput(dwellBatch, args.inputs, 'inputs'), (r) => dwellView(ctx.models, r)),
    predictTravelTime: (_: unknown, args: { input: unknown }, ctx: PredictionContext) =>
      transitView(ctx.models, parseInput(travelInput, args.input)),
    predictTravelTimeBatch: (_: unknown, args: { inputs: unknown }, ctx: PredictionContext) =>
      mapInSlices(parseInput(travelBatch, args.inputs, 'inputs'), (r) => transitView(ctx.models, r)),
    predictLockerDiversion: (_: unknown, args: { input: unknown }, ctx: PredictionContext) =>
      lockerView(ctx.models, parseInput(lockerInput, args.input)),
    predictLockerDiversionBatch: (_: unknown, args: { inputs: unknown }, ctx: PredictionContext) =>
      mapInSlices(parseInput(lockerBatch, args.inputs, 'inputs'), (r) => lockerView(ctx.models, r)),
    coldChainMargin: (
      _: unknown,
      args: { dwell: unknown; travel: unknown; ischaemicRemainingMin: unknown },
      ctx: PredictionContext,
    ) => {
      const input = parseArgs({
        dwell: [dwellInput, args.dwell],
        travel: [travelInput, args.travel],
        ischaemicRemainingMin: [ischaemicRemaining, args.ischaemicRemainingMin],
      });
      // The dwell model reads the same clock as a feature: two different values would give an answer
      // whose dwell risk and margins contradict each other.
      const dwellRemaining = input.dwell['ischaemic_remaining_min'];
      if (dwellRemaining !== input.ischaemicRemainingMin) {
        throw invalidInput([
          { field: 'ischaemicRemainingMin', message: `must equal dwell.ischaemicRemainingMin (${String(dwellRemaining)}): both are the organ's remaining cold-ischaemia time` },
        ]);
      }
      const dwell = dwellView(ctx.models, input.dwell);
      const travel = transitView(ctx.models, input.travel);
      return { ischaemicRemainingMin: input.ischaemicRemainingMin, dwell, travel, ...composeColdChain(dwell, travel, input.ischaemicRemainingMin) };
    },
    predictionModels: (_: unknown, __: unknown, ctx: PredictionContext) => ctx.models,
  },
  DwellForecast: {
    q10Minutes: (d: QuantileTriple) => d.q10,
    q50Minutes: (d: QuantileTriple) => d.q50,
    q90Minutes: (d: QuantileTriple) => d.q90,
    intervalWidthMinutes: (d: QuantileTriple) => r1(d.q90 - d.q10),
    modelVersion: (d: { version: string }) => d.version,
  },
  TransitForecast: {
    q10Minutes: (t: TransitView) => t.q10,
    q50Minutes: (t: TransitView) => t.q50,
    q90Minutes: (t: TransitView) => t.q90,
    intervalWidthMinutes: (t: TransitView) => r1(t.q90 - t.q10),
    arrivalQ10: (t: TransitView) => arrival(t, t.q10),
    arrivalQ50: (t: TransitView) => arrival(t, t.q50),
    arrivalQ90: (t: TransitView) => arrival(t, t.q90),
    modelVersion: (t: TransitView) => t.version,
  },
  LockerForecast: {
    modelVersion: (l: { version: string }) => l.version,
  },
  PredictionModels: {
    ready: () => true,
    seed: (m: ModelSet) => m.metrics.seed,
    trainedAt: (m: ModelSet) => m.metrics.trainedAt,
    trainingSeconds: (m: ModelSet) => m.metrics.trainingSeconds,
    data: (m: ModelSet) => m.metrics.data,
    dwell: (m: ModelSet) => ({ model: m.dwell, metrics: m.metrics.dwell }),
    travel: (m: ModelSet) => ({ model: m.travel, metrics: m.metrics.travel }),
    locker: (m: ModelSet) => ({ model: m.locker, metrics: m.metrics.locker }),
  },
  QuantileModelInfo: {
    version: (i: QuantileInfo) => i.model.version,
    featureCount: (i: QuantileInfo) => MODEL_FEATURES[i.model.name].length,
    trees: (i: QuantileInfo) => i.metrics.trees.q10 + i.metrics.trees.q50 + i.metrics.trees.q90,
    coverage80: (i: QuantileInfo) => i.metrics.coverage80,
    meanWidthMinutes: (i: QuantileInfo) => i.metrics.meanWidthMin,
    uncalibratedCoverage80: (i: QuantileInfo) => i.metrics.uncalibratedCoverage80,
    pinballLoss: (i: QuantileInfo) => i.metrics.pinball.mean,
    baselinePinballLoss: (i: QuantileInfo) => i.metrics.baselinePinball.mean,
    specCoverage80: (i: QuantileInfo) => i.metrics.specCoverage80,
    testSize: (i: QuantileInfo) => i.metrics.samples.test,
    coverageByDecile: (i: QuantileInfo) =>
      Object.entries(i.metrics.coverageByDecile).map(([feature, groups]) => ({
        feature,
        groups: groups.map((g) => ({ from: g.from, to: g.to, size: g.n, coverage80: g.coverage80, meanWidthMinutes: g.meanWidthMin })),
      })),
    baseline: (i: QuantileInfo) => BASELINES[i.model.name].description,
  },
  ClassifierModelInfo: {
    version: (i: ClassifierInfo) => i.model.version,
    featureCount: () => MODEL_FEATURES.locker.length,
    trees: (i: ClassifierInfo) => i.metrics.trees,
    rocAuc: (i: ClassifierInfo) => i.metrics.rocAuc,
    brierScore: (i: ClassifierInfo) => i.metrics.brier,
    baselineBrierScore: (i: ClassifierInfo) => i.metrics.baselineBrier,
    calibrationError: (i: ClassifierInfo) => i.metrics.ece,
    baseRate: (i: ClassifierInfo) => i.metrics.baseRate,
    oracleRocAuc: (i: ClassifierInfo) => i.metrics.oracleRocAuc,
    specRocAuc: (i: ClassifierInfo) => i.metrics.specRocAuc,
    testSize: (i: ClassifierInfo) => i.metrics.samples.test,
    calibrationByDecile: (i: ClassifierInfo) =>
      Object.entries(i.metrics.calibrationByDecile).map(([feature, groups]) => ({
        feature,
        groups: groups.map((g) => ({ from: g.from, to: g.to, size: g.n, meanProbability: g.meanProbability, observedRate: g.observedRate })),
      })),
  },
  Booking: {
    __resolveReference: (ref: BookingRepresentation) => ref,
    deliveryForecast: (b: BookingRepresentation, _: unknown, ctx: PredictionContext) => {
      const departAt = b.deliveryDepartAt instanceof Date ? b.deliveryDepartAt : parseInstant(b.deliveryDepartAt);
      const distance = b.deliveryDistanceKm;
      if (!departAt || typeof distance !== 'number' || !Number.isFinite(distance)) {
        // The gateway always sends the @requires fields; without them the supergraph itself is broken.
        throw new Error(`Booking ${b.id} representation lacks deliveryDistanceKm or deliveryDepartAt`);
      }
      return deliveryForecast(ctx.models, distance, departAt);
    },
  },
} satisfies Resolvers;

interface QuantileInfo {
  model: ModelSet['dwell'];
  metrics: ModelSet['metrics']['dwell'];
}
interface ClassifierInfo {
  model: ModelSet['locker'];
  metrics: ModelSet['metrics']['locker'];
}

/** The typed map above, in the shape `buildSubgraphSchema` accepts. */
export const resolverMap = predictionResolvers as unknown as GraphQLResolverMap<unknown>;
