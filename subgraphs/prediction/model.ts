import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BASELINES, vectorBaseline } from './baseline.js';
import { applyIsotonic, type IsotonicCurve } from './calibration.js';
import type { ConformalAdjustment } from './conformal.js';
import { compileEnsemble, scoreEnsemble, type CompiledEnsemble, type EnsembleJson } from './gbm.js';
import { toVector, vectorNames, type ModelName } from './features.js';
import { metricsReportSchema, type MetricsReport, type QuantileTriple } from './metrics.js';

/*
 * The model artifacts (models/*.json, written by `npm run train`) and the prediction functions the
 * resolvers, the trainer's evaluation and the benchmark all share, so what is measured is what is served.
 */

export const MODELS_DIR = fileURLToPath(new URL('./models/', import.meta.url));
export const METRICS_FILE = fileURLToPath(new URL('./metrics.json', import.meta.url));

export interface QuantileArtifact {
  model: 'dwell' | 'travel';
  kind: 'quantile';
  /** Content hash of the artifact. */
  version: string;
  seed: number;
  /** Vector order: the input features, then the derived ones. */
  features: string[];
  /** The ensembles predict quantiles of ln(minutes / baseline minutes) (baseline.ts). */
  target: 'ln_minutes_over_baseline';
  /** The name of the baseline the ratio is taken to (`BASELINES[model].name`). */
  baseline: string;
  depth: number;
  edges: number[][];
  quantiles: { q10: EnsembleJson; q50: EnsembleJson; q90: EnsembleJson };
  conformal: ConformalAdjustment;
}

export interface ClassifierArtifact {
  model: 'locker';
  kind: 'classifier';
  version: string;
  seed: number;
  features: string[];
  /** The ensemble predicts the log-odds of success; `calibration` maps it to a probability. */
  target: 'log_odds';
  depth: number;
  edges: number[][];
  ensemble: EnsembleJson;
  calibration: IsotonicCurve;
}

export type Artifact = QuantileArtifact | ClassifierArtifact;

/** The content hash that names an artifact's version (its JSON without the version field). */
export function artifactVersion(artifact: Omit<Artifact, 'version'> & { version?: string }): string {
  const { version: _ignored, ...content } = artifact;
  return createHash('sha256').update(JSON.stringify(content)).digest('hex').slice(0, 12);
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** Dwell or travel: q10 / q50 / q90 minutes, non-crossing, with the conformal 80% interval. */
export class QuantileModel {
  readonly name: 'dwell' | 'travel';
  readonly version: string;
  private readonly ensembles: readonly [CompiledEnsemble, CompiledEnsemble, CompiledEnsemble];
  private readonly conformal: ConformalAdjustment;
  private readonly baseline: (x: ArrayLike<number>) => number;

  constructor(readonly artifact: QuantileArtifact) {
    this.name = artifact.model;
    this.version = artifact.version;
    this.baseline = vectorBaseline(artifact.model);
    const { q10, q50, q90 } = artifact.quantiles;
    this.ensembles = [q10, q50, q90].map((e) => compileEnsemble(e, artifact.edges, artifact.depth)) as unknown as [
      CompiledEnsemble,
      CompiledEnsemble,
      CompiledEnsemble,
    ];
    this.conformal = artifact.conformal;
  }

  /** ln of the baseline minutes of an input vector: what the ensembles' ratios are added to. */
  lnBaseline(x: ArrayLike<number>): number {
    return Math.log(this.baseline(x));
  }

  /** The three ensembles' ln-minute quantiles (q10, q50, q90 models: baseline times ratio), as they come. */
  unsortedScores(x: ArrayLike<number>): [number, number, number] {
    const [a, b, c] = this.ensembles;
    const lnBase = this.lnBaseline(x);
    return [lnBase + scoreEnsemble(a, x), lnBase + scoreEnsemble(b, x), lnBase + scoreEnsemble(c, x)];
  }

  /**
   * The raw ln-minute quantiles in increasing order. Sorting is the monotone rearrangement of
   * Chernozhukov, Fernández-Val and Galichon (2010): it never crosses and never moves an estimate
   * further from the true quantiles.
   */
  rawQuantiles(x: ArrayLike<number>): [number, number, number] {
    const s = this.unsortedScores(x).sort((p, q) => p - q);
    return [s[0], s[1], s[2]];
  }

  /** Minutes at q10, q50, q90: the conformal shift applied to the outer quantiles, the median kept inside. */
  predictVector(x: ArrayLike<number>): QuantileTriple {
    const [lo, mid, hi] = this.rawQuantiles(x);
    const lower = Math.min(lo - this.conformal.lower, mid);
    const upper = Math.max(hi + this.conformal.upper, mid);
    return { q10: round1(Math.exp(lower)), q50: round1(Math.exp(mid)), q90: round1(Math.exp(upper)) };
  }

  predict(record: Readonly<Record<string, number>>): QuantileTriple {
    return this.predictVector(toVector(this.name, record));
  }
}

/** Locker: calibrated probability that a diversion succeeds. */
export class LockerModel {
  readonly name = 'locker' as const;
  readonly version: string;
  private readonly ensemble: CompiledEnsemble;

  constructor(readonly artifact: ClassifierArtifact) {
    this.version = artifact.version;
    this.ensemble = compileEnsemble(artifact.ensemble, artifact.edges, artifact.depth);
  }

  logOdds(x: ArrayLike<number>): number {
    return scoreEnsemble(this.ensemble, x);
  }

  predictVector(x: ArrayLike<number>): number {
    return Math.round(applyIsotonic(this.artifact.calibration, this.logOdds(x)) * 1e4) / 1e4;
  }

  predict(record: Readonly<Record<string, number>>): number {
    return this.predictVector(toVector('locker', record));
  }
}

export interface ModelSet {
  dwell: QuantileModel;
  travel: QuantileModel;
  locker: LockerModel;
  metrics: MetricsReport;
}

const ensembleSchema = z.object({
  base: z.number(),
  trees: z.array(z.object({ f: z.array(z.number().int()), b: z.array(z.number().int()), v: z.array(z.number()) })),
});
const common = {
  version: z.string().min(1),
  seed: z.number().int(),
  features: z.array(z.string()),
  depth: z.number().int().min(1).max(12),
  edges: z.array(z.array(z.number())),
};
const quantileSchema = z.object({
  ...common,
  model: z.enum(['dwell', 'travel']),
  kind: z.literal('quantile'),
  target: z.literal('ln_minutes_over_baseline'),
  baseline: z.string(),
  quantiles: z.object({ q10: ensembleSchema, q50: ensembleSchema, q90: ensembleSchema }),
  conformal: z.object({ alpha: z.number(), lower: z.number(), upper: z.number(), calibrationSize: z.number().int() }),
});
const classifierSchema = z.object({
  ...common,
  model: z.literal('locker'),
  kind: z.literal('classifier'),
  target: z.literal('log_odds'),
  ensemble: ensembleSchema,
  calibration: z.object({ x: z.array(z.number()), y: z.array(z.number()) }),
});

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`cannot read model file ${path} (run \`npm run train\`): ${(error as Error).message}`, { cause: error });
  }
}

/** Checks that an artifact's features are the ones this code builds vectors for. */
function checkFeatures(artifact: Artifact, model: ModelName): void {
  const expected = vectorNames(model);
  if (artifact.features.join(',') !== expected.join(',')) {
    throw new Error(`model ${model}: artifact features [${artifact.features.join(', ')}] differ from the code's [${expected.join(', ')}]`);
  }
  if (artifact.edges.length !== expected.length) throw new Error(`model ${model}: ${artifact.edges.length} edge lists for ${expected.length} features`);
}

function quantileModelOf(json: unknown, model: 'dwell' | 'travel'): QuantileModel {
  const artifact = quantileSchema.parse(json);
  if (artifact.model !== model) throw new Error(`expected the ${model} model, found ${artifact.model}`);
  if (artifact.baseline !== BASELINES[model].name) {
    throw new Error(`model ${model}: trained on baseline ${artifact.baseline}, the code computes ${BASELINES[model].name}`);
  }
  checkFeatures(artifact, model);
  return new QuantileModel(artifact);
}

function lockerModelOf(json: unknown): LockerModel {
  const artifact = classifierSchema.parse(json);
  checkFeatures(artifact, 'locker');
  return new LockerModel(artifact);
}

/** Loads and checks the three artifacts and their metrics; throws naming the file that is wrong. */
export function loadModels(dir = MODELS_DIR, metricsFile = METRICS_FILE): ModelSet {
  const load = <T>(file: string, build: (json: unknown) => T): T => {
    const path = isAbsolute(file) ? file : join(dir, file);
    try {
      return build(readJson(path));
    } catch (error) {
      throw new Error(`invalid model file ${path}: ${(error as Error).message}`, { cause: error });
    }
  };
  return {
    dwell: load('dwell.json', (j) => quantileModelOf(j, 'dwell')),
    travel: load('travel.json', (j) => quantileModelOf(j, 'travel')),
    locker: load('locker.json', lockerModelOf),
    metrics: load(metricsFile, (j) => metricsReportSchema.parse(j)),
  };
}
