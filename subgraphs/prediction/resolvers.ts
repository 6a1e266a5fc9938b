import type { z } from 'zod';
import type { FieldProblem } from '../../platform/errors.js';
import { DateTimeScalar, parseInstant } from '../../platform/scalars.js';
import { checkInput, invalidInput, issuesAt, parseInput } from '../../platform/validate.js';
import { BASELINES } from './baseline.js';
import { MODEL_FEATURES } from './features.js';
import { composeColdChain, deliveryTravelFeatures, readDwell } from './forecasts.js';
import { dwellBatch, dwellInput, ischaemicRemaining, lockerBatch, lockerInput, travelBatch, travelInput } from './inputs.js';
import { mapInSlices } from '../../platform/slices.js';
import type { ModelSet } from './model.js';
import type { DwellView, LockerView, TransitView } from './context.js';
import type { Resolvers } from './schema-types.js';

function dwellView(models: ModelSet, record: Record<string, number>): DwellView {
  const q = models.dwell.predict(record);
  return { ...q, ...readDwell(q, record['ischaemic_remaining_min']!), version: models.dwell.version };
}

function transitView(models: ModelSet, record: Record<string, number>, departAt: Date | null = null): TransitView {
  return { ...models.travel.predict(record), version: models.travel.version, departAt };
}

function lockerView(models: ModelSet, record: Record<string, number>): LockerView {
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
  if (!kept) deliveryForecasts.set(models.travel, (kept = new Map<string, TransitView>()));
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

export const predictionResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Query: {
    predictDwell: (_, args, ctx) => dwellView(ctx.models, parseInput(dwellInput, args.input)),
    predictDwellBatch: (_, args, ctx) => mapInSlices(parseInput(dwellBatch, args.inputs, 'inputs'), (r) => dwellView(ctx.models, r)),
    predictTravelTime: (_, args, ctx) => transitView(ctx.models, parseInput(travelInput, args.input)),
    predictTravelTimeBatch: (_, args, ctx) => mapInSlices(parseInput(travelBatch, args.inputs, 'inputs'), (r) => transitView(ctx.models, r)),
    predictLockerDiversion: (_, args, ctx) => lockerView(ctx.models, parseInput(lockerInput, args.input)),
    predictLockerDiversionBatch: (_, args, ctx) => mapInSlices(parseInput(lockerBatch, args.inputs, 'inputs'), (r) => lockerView(ctx.models, r)),
    coldChainMargin: (_, args, ctx) => {
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
          {
            field: 'ischaemicRemainingMin',
            message: `must equal dwell.ischaemicRemainingMin (${String(dwellRemaining)}): both are the organ's remaining cold-ischaemia time`,
          },
        ]);
      }
      const dwell = dwellView(ctx.models, input.dwell);
      const travel = transitView(ctx.models, input.travel);
      return { ischaemicRemainingMin: input.ischaemicRemainingMin, dwell, travel, ...composeColdChain(dwell, travel, input.ischaemicRemainingMin) };
    },
    predictionModels: (_, __, ctx) => ctx.models,
  },
  DwellForecast: {
    q10Minutes: (d) => d.q10,
    q50Minutes: (d) => d.q50,
    q90Minutes: (d) => d.q90,
    intervalWidthMinutes: (d) => r1(d.q90 - d.q10),
    modelVersion: (d) => d.version,
  },
  TransitForecast: {
    q10Minutes: (t) => t.q10,
    q50Minutes: (t) => t.q50,
    q90Minutes: (t) => t.q90,
    intervalWidthMinutes: (t) => r1(t.q90 - t.q10),
    arrivalQ10: (t) => arrival(t, t.q10),
    arrivalQ50: (t) => arrival(t, t.q50),
    arrivalQ90: (t) => arrival(t, t.q90),
    modelVersion: (t) => t.version,
  },
  LockerForecast: {
    modelVersion: (l) => l.version,
  },
  PredictionModels: {
    ready: () => true,
    seed: (m) => m.metrics.seed,
    trainedAt: (m) => m.metrics.trainedAt,
    trainingSeconds: (m) => m.metrics.trainingSeconds,
    data: (m) => m.metrics.data,
    dwell: (m) => ({ model: m.dwell, metrics: m.metrics.dwell }),
    travel: (m) => ({ model: m.travel, metrics: m.metrics.travel }),
    locker: (m) => ({ model: m.locker, metrics: m.metrics.locker }),
  },
  QuantileModelInfo: {
    version: (i) => i.model.version,
    featureCount: (i) => MODEL_FEATURES[i.model.name].length,
    trees: (i) => i.metrics.trees.q10 + i.metrics.trees.q50 + i.metrics.trees.q90,
    coverage80: (i) => i.metrics.coverage80,
    meanWidthMinutes: (i) => i.metrics.meanWidthMin,
    uncalibratedCoverage80: (i) => i.metrics.uncalibratedCoverage80,
    pinballLoss: (i) => i.metrics.pinball.mean,
    baselinePinballLoss: (i) => i.metrics.baselinePinball.mean,
    specCoverage80: (i) => i.metrics.specCoverage80,
    testSize: (i) => i.metrics.samples.test,
    coverageByDecile: (i) =>
      Object.entries(i.metrics.coverageByDecile).map(([feature, groups]) => ({
        feature,
        groups: groups.map((g) => ({ from: g.from, to: g.to, size: g.n, coverage80: g.coverage80, meanWidthMinutes: g.meanWidthMin })),
      })),
    baseline: (i) => BASELINES[i.model.name].description,
  },
  ClassifierModelInfo: {
    version: (i) => i.model.version,
    featureCount: () => MODEL_FEATURES.locker.length,
    trees: (i) => i.metrics.trees,
    rocAuc: (i) => i.metrics.rocAuc,
    brierScore: (i) => i.metrics.brier,
    baselineBrierScore: (i) => i.metrics.baselineBrier,
    calibrationError: (i) => i.metrics.ece,
    baseRate: (i) => i.metrics.baseRate,
    oracleRocAuc: (i) => i.metrics.oracleRocAuc,
    specRocAuc: (i) => i.metrics.specRocAuc,
    testSize: (i) => i.metrics.samples.test,
    calibrationByDecile: (i) =>
      Object.entries(i.metrics.calibrationByDecile).map(([feature, groups]) => ({
        feature,
        groups: groups.map((g) => ({ from: g.from, to: g.to, size: g.n, meanProbability: g.meanProbability, observedRate: g.observedRate })),
      })),
  },
  Booking: {
    __resolveReference: (ref) => ref,
    deliveryForecast: (b, _, ctx) => {
      const departAt = b.deliveryDepartAt instanceof Date ? b.deliveryDepartAt : parseInstant(b.deliveryDepartAt);
      const distance = b.deliveryDistanceKm;
      if (!departAt || typeof distance !== 'number' || !Number.isFinite(distance)) {
        // The gateway always sends the @requires fields; without them the supergraph itself is broken.
        throw new Error(`Booking ${b.id} representation lacks deliveryDistanceKm or deliveryDepartAt`);
      }
      return deliveryForecast(ctx.models, distance, departAt);
    },
  },
};
