import { Sfc32 } from '../../platform/random.js';

/**
 * A seeded pseudo-random source (sfc32, `platform/random.ts`) with the distributions the data generator
 * draws from. The same seed gives the same sequence on every platform.
 */
export class Random extends Sfc32 {
  private spareNormal: number | null = null;

  constructor(seed: number, stream = '') {
    super(Sfc32.seedState(seed, stream));
  }

  uniform(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  bernoulli(p: number): boolean {
    return this.next() < p;
  }

  /** An index drawn with the given (unnormalized) weights. */
  choice(weights: readonly number[]): number {
    const total = weights.reduce((a, b) => a + b, 0);
    let u = this.next() * total;
    for (let i = 0; i < weights.length; i++) {
      u -= weights[i]!;
      if (u < 0) return i;
    }
    return weights.length - 1;
  }

  normal(mean = 0, sd = 1): number {
    if (this.spareNormal !== null) {
      const z = this.spareNormal;
      this.spareNormal = null;
      return mean + sd * z;
    }
    let u = 0;
    while (u === 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = r * Math.sin(2 * Math.PI * v);
    return mean + sd * r * Math.cos(2 * Math.PI * v);
  }

  logNormal(logMedian: number, sigma: number): number {
    return Math.exp(this.normal(logMedian, sigma));
  }

  /** Gamma(shape, scale) by Marsaglia and Tsang. */
  gamma(shape: number, scale: number): number {
    if (shape < 1) return this.gamma(shape + 1, scale) * Math.pow(this.next() || Number.MIN_VALUE, 1 / shape);
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x: number;
      let v: number;
      do {
        x = this.normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = this.next();
      if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale;
    }
  }

  beta(a: number, b: number): number {
    const x = this.gamma(a, 1);
    return x / (x + this.gamma(b, 1));
  }

  poisson(lambda: number): number {
    // Knuth's product method: the rates drawn here stay small.
    const limit = Math.exp(-lambda);
    let k = 0;
    let p = this.next();
    while (p > limit) {
      k++;
      p *= this.next();
    }
    return k;
  }
}
