import { Sfc32, type Sfc32State } from '../../platform/random.js';

/**
 * A seeded pseudo-random source (sfc32, `platform/random.ts`) whose whole state is four 32-bit words, so a
 * session's link model can be stored and resumed exactly where it stopped (after a restart, or on another
 * instance). Not for secrets: key material comes from node:crypto unless a run asks for a seed.
 */
export type RandomState = Sfc32State;

export class Random extends Sfc32 {
  private constructor(state: RandomState) {
    super(state);
  }

  /** A fresh source for a seed and a named stream (different streams of one seed are independent). */
  static seeded(seed: number, stream = ''): Random {
    return new Random(Sfc32.seedState(seed, stream));
  }

  static fromState(state: RandomState): Random {
    return new Random(state);
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
