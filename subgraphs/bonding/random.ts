/**
 * A seeded pseudo-random source (sfc32, seeded through splitmix32) whose whole state is four 32-bit words,
 * so a session's link model can be stored and resumed exactly where it stopped (after a restart, or on
 * another instance). Not for secrets: key material comes from node:crypto unless a run asks for a seed.
 */
export type RandomState = [number, number, number, number];

export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  private constructor(state: RandomState) {
    [this.a, this.b, this.c, this.d] = state;
  }

  /** A fresh source for a seed and a named stream (different streams of one seed are independent). */
  static seeded(seed: number, stream = ''): Random {
    let s = (Math.floor(seed) ^ Math.floor(seed / 4294967296) ^ hashString(stream)) >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    const r = new Random([next(), next(), next(), next()]);
    for (let i = 0; i < 12; i++) r.uint32();
    return r;
  }

  static fromState(state: RandomState): Random {
    return new Random([state[0] >>> 0, state[1] >>> 0, state[2] >>> 0, state[3] >>> 0]);
  }

  state(): RandomState {
    return [this.a, this.b, this.c, this.d];
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

  normal(): number {
    // Box-Muller; 1 - next() is in (0, 1], so the log is finite.
    return Math.sqrt(-2 * Math.log(1 - this.next())) * Math.cos(2 * Math.PI * this.next());
  }

  /** Exponential with the given mean. */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** Log-normal with the given median and log-scale sigma. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** Fills `out` with random bytes. */
  bytes(out: Uint8Array): Uint8Array {
    for (let i = 0; i < out.length; i += 4) {
      const w = this.uint32();
      for (let k = 0; k < 4 && i + k < out.length; k++) out[i + k] = (w >>> (8 * k)) & 0xff;
    }
    return out;
  }
}

export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h >>> 0;
}
