import { MAX_BINS, type Binned } from './binning.js';
import type { Random } from '../../platform/random.js';
import { sigmoid } from '../../platform/statistics.js';

/*
 * Histogram-binned gradient-boosted trees (the LightGBM / sklearn HistGradientBoosting recipe, small):
 * features are pre-binned into at most 64 quantile bins, trees grow depth-wise to a fixed depth with
 * histogram subtraction, each tree sees a row subsample, and early stopping watches a validation split.
 *
 * - Quantile regression (pinball loss at level τ): each tree is fit to the negative gradient
 *   (τ - 1[y < F]), then every leaf takes the τ-quantile of the residuals of its rows (the exact line search
 *   for the pinball loss), as gradient-boosted quantile regression does in sklearn and LightGBM.
 * - Binary classification (logistic loss): Newton boosting; split gain G²/(H+λ), leaf value -G/(H+λ).
 *
 * Trees are stored complete (2^depth leaves): a node that does not split sends every row left, so a
 * prediction is `depth` comparisons with no branching on node kind.
 */

export interface BoostParams {
  /** Upper bound on the number of trees; early stopping usually ends sooner. */
  maxTrees: number;
  learningRate: number;
  depth: number;
  /** Fewest training rows in a leaf. */
  minLeaf: number;
  /** Share of the rows each tree is grown on. */
  subsample: number;
  /** L2 penalty on leaf values (classification) and on split gains. */
  lambda: number;
  /** Stop after this many trees without a better validation loss. */
  patience: number;
}

/** A complete tree of depth d: 2^d - 1 split nodes (feature, bin; bin -1 sends every row left), 2^d leaves. */
interface Tree {
  feature: Int32Array;
  bin: Int32Array;
  value: Float64Array;
}

/** The artifact form of a tree: short arrays, leaf values rounded. */
interface TreeJson {
  f: number[];
  b: number[];
  v: number[];
}

export interface EnsembleJson {
  base: number;
  trees: TreeJson[];
}

const leafOfBinned = (tree: Tree, depth: number, bins: Uint8Array, offset: number): number => {
  let node = 0;
  for (let level = 0; level < depth; level++) {
    const b = tree.bin[node]!;
    node = 2 * node + (b >= 0 && bins[offset + tree.feature[node]!]! > b ? 2 : 1);
  }
  return node - ((1 << depth) - 1);
};

interface Grown {
  feature: Int32Array;
  bin: Int32Array;
  /** The sampled rows that reach each leaf. */
  leafRows: Uint32Array[];
}

const STATS = 3;

/** Grows one depth-limited tree on the sampled rows, splitting to reduce the squared error of -g/h. */
function growTree(data: Binned, nBins: Int32Array, rows: Uint32Array, g: Float64Array, h: Float64Array, p: BoostParams): Grown {
  const { width, bins } = data;
  const depth = p.depth;
  const internal = (1 << depth) - 1;
  const feature = new Int32Array(internal);
  const bin = new Int32Array(internal).fill(-1);
  const histSize = width * MAX_BINS * STATS;

  const buildHist = (rs: Uint32Array) => {
    const hist = new Float64Array(histSize);
    for (let k = 0; k < rs.length; k++) {
      const i = rs[k]!;
      const gi = g[i]!;
      const hi = h[i]!;
      const offset = i * width;
      for (let j = 0; j < width; j++) {
        const idx = (j * MAX_BINS + bins[offset + j]!) * STATS;
        hist[idx]! += gi;
        hist[idx + 1]! += hi;
        hist[idx + 2]! += 1;
      }
    }
    return hist;
  };

  let levelRows: Uint32Array[] = [rows];
  let levelHists: (Float64Array | null)[] = [buildHist(rows)];
  for (let level = 0; level < depth; level++) {
    const nextRows: Uint32Array[] = [];
    const nextHists: (Float64Array | null)[] = [];
    const last = level === depth - 1;
    for (let k = 0; k < levelRows.length; k++) {
      const node = (1 << level) - 1 + k;
      const rs = levelRows[k]!;
      const hist = levelHists[k];
      const split = hist && rs.length >= 2 * p.minLeaf ? bestSplit(hist, nBins, width, p) : null;
      if (!split) {
        nextRows.push(rs, new Uint32Array(0));
        nextHists.push(null, null);
        continue;
      }
      feature[node] = split.feature;
      bin[node] = split.bin;
      let nLeft = 0;
      for (let q = 0; q < rs.length; q++) if (bins[rs[q]! * width + split.feature]! <= split.bin) nLeft++;
      const left = new Uint32Array(nLeft);
      const right = new Uint32Array(rs.length - nLeft);
      let a = 0;
      let c = 0;
      for (let q = 0; q < rs.length; q++) {
        const i = rs[q]!;
        if (bins[i * width + split.feature]! <= split.bin) left[a++] = i;
        else right[c++] = i;
      }
      nextRows.push(left, right);
      if (last) {
        nextHists.push(null, null);
      } else {
        // Histogram subtraction: scan the smaller child, derive the larger one from the parent.
        const smallIsLeft = left.length <= right.length;
        const small = buildHist(smallIsLeft ? left : right);
        const large = new Float64Array(histSize);
        for (let q = 0; q < histSize; q++) large[q] = hist![q]! - small[q]!;
        nextHists.push(smallIsLeft ? small : large, smallIsLeft ? large : small);
      }
    }
    levelRows = nextRows;
    levelHists = nextHists;
  }
  return { feature, bin, leafRows: levelRows };
}

function bestSplit(hist: Float64Array, nBins: Int32Array, width: number, p: BoostParams): { feature: number; bin: number } | null {
  let G = 0;
  let H = 0;
  let N = 0;
  for (let b = 0; b < MAX_BINS; b++) {
    G += hist[b * STATS]!;
    H += hist[b * STATS + 1]!;
    N += hist[b * STATS + 2]!;
  }
  const parent = (G * G) / (H + p.lambda);
  let best = 1e-9;
  let bestFeature = -1;
  let bestBin = -1;
  for (let j = 0; j < width; j++) {
    let gl = 0;
    let hl = 0;
    let nl = 0;
    const base = j * MAX_BINS * STATS;
    for (let b = 0; b < nBins[j]! - 1; b++) {
      gl += hist[base + b * STATS]!;
      hl += hist[base + b * STATS + 1]!;
      nl += hist[base + b * STATS + 2]!;
      if (nl < p.minLeaf) continue;
      if (N - nl < p.minLeaf) break;
      const gr = G - gl;
      const hr = H - hl;
      const gain = (gl * gl) / (hl + p.lambda) + (gr * gr) / (hr + p.lambda) - parent;
      if (gain > best) {
        best = gain;
        bestFeature = j;
        bestBin = b;
      }
    }
  }
  return bestFeature < 0 ? null : { feature: bestFeature, bin: bestBin };
}

function sampleRows(n: number, share: number, rng: Random): Uint32Array {
  if (share >= 1) return Uint32Array.from({ length: n }, (_, i) => i);
  const picked: number[] = [];
  for (let i = 0; i < n; i++) if (rng.next() < share) picked.push(i);
  return Uint32Array.from(picked);
}

/** The τ-quantile of `values` (linear interpolation between order statistics). */
export function quantileOf(values: Float64Array, tau: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  const pos = tau * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo]! + (pos - lo) * (sorted[hi]! - sorted[lo]!);
}

export const pinball = (y: number, q: number, tau: number) => (y >= q ? tau * (y - q) : (1 - tau) * (q - y));

interface Loss {
  init(y: Float64Array): number;
  /** Fills gradient and hessian at the current scores. */
  derivatives(y: Float64Array, f: Float64Array, g: Float64Array, h: Float64Array): void;
  leafValue(rows: Uint32Array, y: Float64Array, f: Float64Array, g: Float64Array, h: Float64Array, lambda: number): number;
  loss(y: Float64Array, f: Float64Array): number;
}

export function quantileLoss(tau: number): Loss {
  return {
    init: (y) => quantileOf(y, tau),
    derivatives(y, f, g, h) {
      for (let i = 0; i < y.length; i++) {
        g[i] = y[i]! < f[i]! ? 1 - tau : -tau;
        h[i] = 1;
      }
    },
    leafValue(rows, y, f) {
      const residuals = new Float64Array(rows.length);
      for (let k = 0; k < rows.length; k++) residuals[k] = y[rows[k]!]! - f[rows[k]!]!;
      return quantileOf(residuals, tau);
    },
    loss(y, f) {
      let sum = 0;
      for (let i = 0; i < y.length; i++) sum += pinball(y[i]!, f[i]!, tau);
      return sum / y.length;
    },
  };
}

export const logisticLoss: Loss = {
  init(y) {
    let mean = 0;
    for (let i = 0; i < y.length; i++) mean += y[i]!;
    mean /= y.length;
    return Math.log(mean / (1 - mean));
  },
  derivatives(y, f, g, h) {
    for (let i = 0; i < y.length; i++) {
      const p = sigmoid(f[i]!);
      g[i] = p - y[i]!;
      h[i] = Math.max(p * (1 - p), 1e-6);
    }
  },
  leafValue(rows, _y, _f, g, h, lambda) {
    let G = 0;
    let H = 0;
    for (let k = 0; k < rows.length; k++) {
      G += g[rows[k]!]!;
      H += h[rows[k]!]!;
    }
    return -G / (H + lambda);
  },
  loss(y, f) {
    let sum = 0;
    for (let i = 0; i < y.length; i++) {
      const p = Math.min(1 - 1e-12, Math.max(1e-12, sigmoid(f[i]!)));
      sum -= y[i]! * Math.log(p) + (1 - y[i]!) * Math.log(1 - p);
    }
    return sum / y.length;
  },
};

export interface BoostResult {
  ensemble: EnsembleJson;
  /** Validation loss after each tree (index 0: the constant model). */
  validationLoss: number[];
  bestTrees: number;
}

/**
 * Boosts trees for one loss on binned training rows, stopping when the validation loss has not improved
 * for `patience` trees, and keeps the best prefix. Leaf values are rounded to `digits` decimals.
 */
export function boost(
  train: Binned,
  y: Float64Array,
  valid: Binned,
  yValid: Float64Array,
  edges: readonly number[][],
  loss: Loss,
  p: BoostParams,
  rng: Random,
  digits = 5,
): BoostResult {
  const round = (x: number) => Number(x.toFixed(digits));
  const nBins = Int32Array.from(edges, (e) => e.length + 1);
  const base = round(loss.init(y));
  const f = new Float64Array(train.rows).fill(base);
  const fv = new Float64Array(valid.rows).fill(base);
  const g = new Float64Array(train.rows);
  const h = new Float64Array(train.rows);
  const trees: TreeJson[] = [];
  const validationLoss = [loss.loss(yValid, fv)];
  let best = validationLoss[0]!;
  let bestTrees = 0;
  for (let t = 0; t < p.maxTrees; t++) {
    loss.derivatives(y, f, g, h);
    const grown = growTree(train, nBins, sampleRows(train.rows, p.subsample, rng), g, h, p);
    const value = new Float64Array(grown.leafRows.length);
    grown.leafRows.forEach((rows, leaf) => {
      value[leaf] = rows.length === 0 ? 0 : round(p.learningRate * loss.leafValue(rows, y, f, g, h, p.lambda));
    });
    const tree: Tree = { feature: grown.feature, bin: grown.bin, value };
    for (let i = 0; i < train.rows; i++) f[i]! += value[leafOfBinned(tree, p.depth, train.bins, i * train.width)]!;
    for (let i = 0; i < valid.rows; i++) fv[i]! += value[leafOfBinned(tree, p.depth, valid.bins, i * valid.width)]!;
    trees.push({ f: Array.from(grown.feature), b: Array.from(grown.bin), v: Array.from(value) });
    const current = loss.loss(yValid, fv);
    validationLoss.push(current);
    if (current < best - 1e-12) {
      best = current;
      bestTrees = t + 1;
    } else if (t + 1 - bestTrees >= p.patience) {
      break;
    }
  }
  return { ensemble: { base, trees: trees.slice(0, bestTrees) }, validationLoss, bestTrees };
}

/** A tree ensemble ready to score raw feature vectors. */
export interface CompiledEnsemble {
  depth: number;
  base: number;
  /** Per tree, per split node: feature index and threshold (x > threshold goes right). */
  features: Int32Array;
  thresholds: Float64Array;
  values: Float64Array;
  trees: number;
}

export function compileEnsemble(json: EnsembleJson, edges: readonly number[][], depth: number): CompiledEnsemble {
  const internal = (1 << depth) - 1;
  const leaves = 1 << depth;
  const features = new Int32Array(json.trees.length * internal);
  const thresholds = new Float64Array(json.trees.length * internal);
  const values = new Float64Array(json.trees.length * leaves);
  json.trees.forEach((tree, t) => {
    if (tree.f.length !== internal || tree.b.length !== internal || tree.v.length !== leaves) {
      throw new Error(`tree ${t} does not have depth ${depth}`);
    }
    for (let n = 0; n < internal; n++) {
      const feature = tree.f[n]!;
      const bin = tree.b[n]!;
      const featureEdges = edges[feature];
      if (!featureEdges) throw new Error(`tree ${t} splits on unknown feature ${feature}`);
      features[t * internal + n] = feature;
      thresholds[t * internal + n] = bin < 0 ? Number.POSITIVE_INFINITY : (featureEdges[bin] ?? Number.POSITIVE_INFINITY);
    }
    values.set(tree.v, t * leaves);
  });
  return { depth, base: json.base, features, thresholds, values, trees: json.trees.length };
}

/** The ensemble's raw score (a quantile in the model's target scale, or a log-odds) for one vector. */
export function scoreEnsemble(model: CompiledEnsemble, x: ArrayLike<number>): number {
  const { depth, features, thresholds, values } = model;
  const internal = (1 << depth) - 1;
  const leaves = 1 << depth;
  let sum = model.base;
  for (let t = 0; t < model.trees; t++) {
    const offset = t * internal;
    let node = 0;
    for (let level = 0; level < depth; level++) {
      node = 2 * node + (x[features[offset + node]!]! > thresholds[offset + node]! ? 2 : 1);
    }
    sum += values[t * leaves + node - internal]!;
  }
  return sum;
}
