import { domainError } from '../../platform/errors.js';
import type { Matches } from './frame.js';
import type { ModelName } from './generator.js';
import { rocAuc } from '../../platform/statistics.js';
import { fit, metricName, metricOf, permutationImportance, undefinedOn, type Task } from './learn.js';
import { labelSetRows, type EntityRow, type OfflineStore } from './offline.js';
import { viewDefinition } from './registry.js';

/** The three actuarial models: their label set, task, feature views and out-of-time cutoff. */
const MODEL_SPECS: Record<ModelName, { task: Task; views: readonly string[]; testFrom: number; description: string }> = {
  underwriting: {
    task: 'classification',
    views: ['policy_profile', 'policy_claims_history'],
    testFrom: Date.UTC(2024, 0, 1),
    description: 'a claim within the 12 months of a policy term, at the term start',
  },
  pricing: {
    task: 'regression',
    views: ['policy_profile', 'policy_claims_history'],
    testFrom: Date.UTC(2024, 0, 1),
    description: 'claim cost of a policy term (log1p EUR), at the term start',
  },
  fraud: {
    task: 'classification',
    views: ['claim_report', 'policy_profile', 'policy_claims_history', 'claim_settlement'],
    testFrom: Date.UTC(2024, 6, 1),
    description: 'the fraud flag of a claim, when its report is recorded (an hour after the report)',
  },
};

interface LeakageFinding {
  view: string;
  feature: string;
  column: string;
  severity: 'SEVERE' | 'MILD';
  rows: number;
  rowsWithoutPitValue: number;
  medianLeadHours: number;
  /** Null where the label set holds one class only (AUC undefined). */
  separationGain: number | null;
}

/** Metrics are null, with the reason, where a split cannot define them (one class, equal labels). */
interface ModelEvaluation {
  metric: string;
  pointInTime: number | null;
  unguardedOffline: number | null;
  unguardedInProduction: number | null;
  inflation: number | null;
  unavailableReason: string | null;
  trainRows: number;
  testRows: number;
  testFrom: Date;
}

/** One view joined by event time (Feast's rule) instead of as known, the other views as known. */
interface AvailabilityViewDifference {
  view: string;
  /** Label rows where the view's values differ between the two rules (a correction created after the event). */
  rows: number;
  /** The held-out metric with this view joined by event time. */
  eventTime: number | null;
  /** eventTime minus the as-known metric. */
  difference: number | null;
}

/** The point-in-time model trained and scored as known (the default) and by event time, and per view. */
interface AvailabilityComparison {
  asKnown: number | null;
  eventTime: number | null;
  difference: number | null;
  views: AvailabilityViewDifference[];
}

export interface LeakageAudit {
  labelSet: Uppercase<ModelName>;
  labelRows: number;
  rowsWithFindings: number;
  findings: LeakageFinding[];
  evaluation: ModelEvaluation;
  availability: AvailabilityComparison;
}

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
/** Rounded, or null for NaN (a metric the data leaves undefined). */
const metricValue = (x: number): number | null => (Number.isNaN(x) ? null : round4(x));
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * An out-of-time split that leaves one side empty is the caller's choice of cutoff, not a result:
 * refused with both counts and the span of the label set's events.
 */
function requireBothSplits(rows: readonly { eventTs: number }[], cutoff: number, train: number, test: number): void {
  if (train > 0 && test > 0) return;
  const first = rows.reduce((m, r) => Math.min(m, r.eventTs), Infinity);
  const last = rows.reduce((m, r) => Math.max(m, r.eventTs), -Infinity);
  const span = rows.length > 0 ? `; its events run from ${iso(first)} to ${iso(last)}` : '';
  const empty = train === 0 ? 'training' : 'test';
  const message =
    `test_from ${iso(cutoff)} leaves the ${empty} split empty (training ${train} rows before it, test ${test} rows at or after it, ` +
    `of ${rows.length} label rows${span}): no model can be ${train === 0 ? 'trained' : 'scored'}`;
  throw domainError('BAD_USER_INPUT', message, [{ field: 'testFrom', message }]);
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Univariate separation of a column from the label: |AUC - 0.5|, nulls ranked lowest. */
function separation(col: Float64Array, label: ArrayLike<number>): number {
  const filled = Float64Array.from(col, (x) => (Number.isNaN(x) ? -Number.MAX_VALUE : x));
  return Math.abs(rocAuc(filled, label) - 0.5);
}

const same = (a: number, b: number) => a === b || (Number.isNaN(a) && Number.isNaN(b));

/** Frame columns and values as the offline store gathers them from one join's matches. */
type GatheredFrame = ReturnType<OfflineStore['gather']>;

/**
 * Scans a label set against feature views: where an unguarded latest-value join would use a row from
 * after the event (feature_timestamp > event_timestamp) with another value than the point-in-time join,
 * per feature; then trains the model both ways and scores both on the later, out-of-time period.
 */
export async function leakageAudit(offline: OfflineStore, model: ModelName, views: readonly string[] | null, testFrom: number | null): Promise<LeakageAudit> {
  const spec = MODEL_SPECS[model];
  const viewNames = views ?? spec.views;
  const rows = labelSetRows(offline.labelRows(model));
  const labels = offline.toLabels(rows);
  const { matches: pit } = await offline.match(viewNames, labels, 'DUCKDB', new Map(), 'AS_KNOWN');
  const { matches: byEventTime } = await offline.match(viewNames, labels, 'DUCKDB', new Map(), 'EVENT_TIME');
  const latest = offline.latestValues(labels, viewNames);
  const pitFrame = offline.gather(rows, viewNames, pit);
  const rawFrame = offline.gather(rows, viewNames, latest);
  const eventTimeFrame = offline.gather(rows, viewNames, byEventTime);
  const y = Float64Array.from(rows, (r) => r.label ?? 0);
  const binary = Float64Array.from(y, (v) => (v > 0 ? 1 : 0));
  const leaks = findLeaks(offline, viewNames, labels.ts, latest, pitFrame, rawFrame, binary);

  const cutoff = testFrom ?? spec.testFrom;
  const split = outOfTimeSplit(rows, cutoff, spec.task, spec.task === 'classification' ? binary : Float64Array.from(y, Math.log1p));
  const pointInTime = split.score(pitFrame.values);
  const availability = compareAvailability(viewNames, rows.length, pitFrame, eventTimeFrame, pointInTime, split.score);
  const unguarded = split.unguarded(rawFrame.values, pitFrame.values);
  return {
    labelSet: model.toUpperCase() as Uppercase<ModelName>,
    labelRows: rows.length,
    rowsWithFindings: leaks.rowsWithFindings,
    findings: leaks.findings,
    evaluation: {
      metric: metricName(spec.task),
      pointInTime: metricValue(pointInTime),
      unguardedOffline: metricValue(unguarded.offline),
      unguardedInProduction: metricValue(unguarded.inProduction),
      inflation: metricValue(unguarded.offline - pointInTime),
      unavailableReason: split.unavailableReason,
      trainRows: split.trainRows,
      testRows: split.testRows,
      testFrom: new Date(cutoff),
    },
    availability,
  };
}

/**
 * Per feature, the label rows where the latest-value join takes a row from after the event with another
 * value than the point-in-time join: how many, how many have no point-in-time value at all, how far ahead
 * the leaked rows are, and how much better the leaked column separates the label. Severe findings first,
 * then by separation gained and rows.
 */
function findLeaks(
  offline: OfflineStore,
  viewNames: readonly string[],
  eventTs: Float64Array,
  latest: ReadonlyMap<string, Matches>,
  pitFrame: GatheredFrame,
  rawFrame: GatheredFrame,
  binary: Float64Array,
): { findings: LeakageFinding[]; rowsWithFindings: number } {
  const findings: LeakageFinding[] = [];
  const flagged = new Uint8Array(eventTs.length);
  let column = 0;
  for (const name of viewNames) {
    const view = offline.views.get(name)!;
    const def = viewDefinition(name)!;
    const late: Matches = latest.get(name)!;
    for (const feature of def.features) {
      const pitCol = pitFrame.values[column]!;
      const rawCol = rawFrame.values[column]!;
      let count = 0;
      let withoutPit = 0;
      const leads: number[] = [];
      for (let i = 0; i < eventTs.length; i++) {
        const r = late[i]!;
        if (r < 0 || view.ts[r]! <= eventTs[i]! || same(pitCol[i]!, rawCol[i]!)) continue;
        count++;
        flagged[i] = 1;
        if (Number.isNaN(pitCol[i]!)) withoutPit++;
        leads.push((view.ts[r]! - eventTs[i]!) / 3_600_000);
      }
      if (count > 0) {
        findings.push({
          view: name,
          feature: feature.name,
          column: pitFrame.columns[column]!.name,
          severity: def.postOutcome || withoutPit * 2 >= count ? 'SEVERE' : 'MILD',
          rows: count,
          rowsWithoutPitValue: withoutPit,
          medianLeadHours: Math.round(median(leads) * 10) / 10,
          separationGain: metricValue(separation(rawCol, binary) - separation(pitCol, binary)),
        });
      }
      column++;
    }
  }
  findings.sort(
    (a, b) => (a.severity === b.severity ? 0 : a.severity === 'SEVERE' ? -1 : 1) || (b.separationGain ?? 0) - (a.separationGain ?? 0) || b.rows - a.rows,
  );
  return { findings, rowsWithFindings: flagged.reduce((s, f) => s + f, 0) };
}

/**
 * The label rows split at `cutoff` (training before it, test at or after it; both must hold rows), and
 * the held-out metric of a model trained on the one and scored on the other: NaN, with the reason, where
 * a split leaves the metric undefined.
 */
function outOfTimeSplit(rows: readonly EntityRow[], cutoff: number, task: Task, target: Float64Array) {
  const train = rows.map((_, i) => i).filter((i) => rows[i]!.eventTs < cutoff);
  const test = rows.map((_, i) => i).filter((i) => rows[i]!.eventTs >= cutoff);
  requireBothSplits(rows, cutoff, train.length, test.length);
  const pick = (cols: readonly Float64Array[], idx: number[]) => cols.map((c) => Float64Array.from(idx, (i) => c[i]!));
  const yTrain = Float64Array.from(train, (i) => target[i]!);
  const yTest = Float64Array.from(test, (i) => target[i]!);
  const unavailableReason = undefinedOn(task, 'training', yTrain) ?? undefinedOn(task, 'test', yTest);
  const metric = metricOf(task);
  return {
    trainRows: train.length,
    testRows: test.length,
    unavailableReason,
    /** Trained on the period before the cutoff and scored after it, both on `values`. */
    score: (values: readonly Float64Array[]): number =>
      unavailableReason === null ? metric(fit(task, pick(values, train), yTrain).predict(pick(values, test)), yTest) : NaN,
    /**
     * Trained on the latest values: scored on them too (what an unguarded offline evaluation reports) and on
     * the point-in-time values (what the model meets in production).
     */
    unguarded(raw: readonly Float64Array[], pit: readonly Float64Array[]): { offline: number; inProduction: number } {
      if (unavailableReason !== null) return { offline: NaN, inProduction: NaN };
      const rawModel = fit(task, pick(raw, train), yTrain);
      return { offline: metric(rawModel.predict(pick(raw, test)), yTest), inProduction: metric(rawModel.predict(pick(pit, test)), yTest) };
    },
  };
}

/**
 * The point-in-time model trained and scored with every view joined by event time instead of as known,
 * and with each view alone joined so while the others stay as known (only views whose values differ are
 * trained again).
 */
function compareAvailability(
  viewNames: readonly string[],
  rowCount: number,
  pitFrame: GatheredFrame,
  eventTimeFrame: GatheredFrame,
  asKnownMetric: number,
  score: (values: readonly Float64Array[]) => number,
): AvailabilityComparison {
  // Per view: the columns it contributes, joined by event time while every other view stays as known.
  const viewColumns = new Map<string, number[]>();
  pitFrame.columns.forEach((c, j) => viewColumns.set(c.view, [...(viewColumns.get(c.view) ?? []), j]));
  const views: AvailabilityViewDifference[] = viewNames.map((view) => {
    const cols = new Set(viewColumns.get(view) ?? []);
    let differing = 0;
    for (let i = 0; i < rowCount; i++) {
      for (const j of cols) {
        if (!same(pitFrame.values[j]![i]!, eventTimeFrame.values[j]![i]!)) {
          differing++;
          break;
        }
      }
    }
    const eventTime = differing === 0 ? asKnownMetric : score(pitFrame.values.map((col, j) => (cols.has(j) ? eventTimeFrame.values[j]! : col)));
    return { view, rows: differing, eventTime: metricValue(eventTime), difference: metricValue(eventTime - asKnownMetric) };
  });
  const allEventTime = views.every((v) => v.rows === 0) ? asKnownMetric : score(eventTimeFrame.values);
  return {
    asKnown: metricValue(asKnownMetric),
    eventTime: metricValue(allEventTime),
    difference: metricValue(allEventTime - asKnownMetric),
    views,
  };
}

export interface ModelImportance {
  model: Uppercase<ModelName>;
  metric: string;
  /** Null, with the reason, where a split cannot define the metric (then every importance is null too). */
  heldOut: number | null;
  unavailableReason: string | null;
  trainRows: number;
  testRows: number;
  testFrom: Date;
  features: { column: string; importance: number | null; rank: number }[];
}

/** Permutation importance of each model trained on its point-in-time frame, on the out-of-time period. */
export async function featureImportance(offline: OfflineStore): Promise<ModelImportance[]> {
  const out: ModelImportance[] = [];
  for (const model of ['underwriting', 'pricing', 'fraud'] as const) {
    const spec = MODEL_SPECS[model];
    const rows = labelSetRows(offline.labelRows(model));
    const frame = await offline.frame(rows, spec.views, 'DUCKDB');
    const y = Float64Array.from(rows, (r) => (spec.task === 'classification' ? ((r.label ?? 0) > 0 ? 1 : 0) : Math.log1p(r.label ?? 0)));
    const train = rows.map((_, i) => i).filter((i) => rows[i]!.eventTs < spec.testFrom);
    const test = rows.map((_, i) => i).filter((i) => rows[i]!.eventTs >= spec.testFrom);
    const pick = (idx: number[]) => frame.values.map((c) => Float64Array.from(idx, (i) => c[i]!));
    const yTrain = Float64Array.from(train, (i) => y[i]!);
    const yTest = Float64Array.from(test, (i) => y[i]!);
    const unavailableReason = undefinedOn(spec.task, 'training', yTrain) ?? undefinedOn(spec.task, 'test', yTest);
    let heldOut = NaN;
    let importance: number[] = frame.columns.map(() => NaN);
    if (unavailableReason === null) {
      const fitted = fit(spec.task, pick(train), yTrain);
      const testCols = pick(test);
      heldOut = metricOf(spec.task)(fitted.predict(testCols), yTest);
      importance = permutationImportance(fitted, spec.task, testCols, yTest);
    }
    const features = frame.columns
      .map((c, j) => ({ column: c.name, importance: metricValue(importance[j]!) }))
      .sort((a, b) => (b.importance ?? -Infinity) - (a.importance ?? -Infinity) || 0)
      .map((f, i) => ({ ...f, rank: i + 1 }));
    out.push({
      model: model.toUpperCase() as Uppercase<ModelName>,
      metric: metricName(spec.task),
      heldOut: metricValue(heldOut),
      unavailableReason,
      trainRows: train.length,
      testRows: test.length,
      testFrom: new Date(spec.testFrom),
      features,
    });
  }
  return out;
}
