/**
 * sfc32, seeded through splitmix32: a small, fast pseudo-random source whose whole state is four 32-bit
 * words, so a sequence can be stored and resumed exactly. The same seed and stream give the same sequence on
 * every platform. Not for secrets (key material comes from node:crypto). The subgraphs extend it with the
 * distributions they draw from.
 */
export type RandomState = [number, number, number, number];
type Sfc32State = RandomState;

class Sfc32 {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  protected constructor(state: Sfc32State) {
    [this.a, this.b, this.c, this.d] = [state[0] >>> 0, state[1] >>> 0, state[2] >>> 0, state[3] >>> 0];
  }

  /**
   * The state for a seed and a named stream (different streams of one seed are independent): four words of
   * splitmix32 from seed XOR hash(stream), then 12 draws discarded. Seeds above 2^32 mix in their high part.
   */
  protected static seedState(seed: number, stream: string): Sfc32State {
    let s = (Math.floor(seed) ^ Math.floor(seed / 4294967296) ^ hashString(stream)) >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    const warm = new Sfc32([next(), next(), next(), next()]);
    for (let i = 0; i < 12; i++) warm.uint32();
    return warm.state();
  }

  state(): Sfc32State {
    return [this.a, this.b, this.c, this.d];
  }

  protected restore(state: Sfc32State): void {
    [this.a, this.b, this.c, this.d] = [state[0] >>> 0, state[1] >>> 0, state[2] >>> 0, state[3] >>> 0];
  }

  uint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.uint32() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}

/** FNV-1a of a string, 32 bits. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h >>> 0;
}

/**
 * The one seeded source of the project, with the distributions the subgraphs draw from: the data generators
 * and model code (uniform, Bernoulli, weighted choice, normal, log-normal, gamma, beta, Poisson), the fleet
 * simulation and the optimization runs (integers, ranges, shuffles), and the resumable link model of a
 * bonding session, whose whole state is `state()` (`fromState`, `normalUnpaired`, `exponential`, `bytes`).
 * The same seed and stream give the same sequence on every platform.
 */
export class Random extends Sfc32 {
  private spareNormal: number | null = null;

  constructor(seed: number, stream = '') {
    super(Sfc32.seedState(seed, stream));
  }

  /**
   * A source resumed exactly where `state()` was taken. Only draws that keep nothing beside the four words
   * resume exactly: a resumable source uses `normalUnpaired`, not `normal` (which keeps the pair's second value).
   */
  static fromState(state: Sfc32State): Random {
    const random = new Random(0);
    random.restore(state);
    return random;
  }

  /** Uniform in [lo, hi). */
  range(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** In place (Fisher-Yates). */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }

  /**
   * A standard normal from one Box-Muller pair, the pair's second value dropped, so `state()` stays the whole
   * state (a stored link model resumes exactly). 1 - next() is in (0, 1], so the log is finite.
   */
  normalUnpaired(): number {
    return Math.sqrt(-2 * Math.log(1 - this.next())) * Math.cos(2 * Math.PI * this.next());
  }

  /** Exponential with the given mean. */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** Fills `out` with pseudo-random bytes (seeded runs only: key material comes from node:crypto). */
  bytes(out: Uint8Array): Uint8Array {
    for (let i = 0; i < out.length; i += 4) {
      const w = this.uint32();
      for (let k = 0; k < 4 && i + k < out.length; k++) out[i + k] = (w >>> (8 * k)) & 0xff;
    }
    return out;
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
