import type { WeightedEdge } from './problem.js';
import { Random } from '../../platform/random.js';

/**
 * A uniformly drawn simple 3-regular graph on n vertices (n even, >= 4): the configuration model with
 * rejection of loops and multi-edges, seeded. These are the instances the QAOA performance bounds
 * (0.6924 at p = 1, 0.7559 at p = 2) are proven for.
 */
export function random3Regular(n: number, seed: number): WeightedEdge[] {
  if (n < 4 || n % 2 !== 0) throw new RangeError('a 3-regular graph needs an even n >= 4');
  const rng = new Random(seed, 'regular3');
  for (let attempt = 0; attempt < 10_000; attempt++) {
    const halfEdges = rng.shuffle(Array.from({ length: 3 * n }, (_, k) => Math.floor(k / 3)));
    const seen = new Set<number>();
    const edges: WeightedEdge[] = [];
    let ok = true;
    for (let k = 0; k < halfEdges.length; k += 2) {
      const u = Math.min(halfEdges[k]!, halfEdges[k + 1]!);
      const v = Math.max(halfEdges[k]!, halfEdges[k + 1]!);
      if (u === v || seen.has(u * n + v)) {
        ok = false;
        break;
      }
      seen.add(u * n + v);
      edges.push({ u, v, w: 1 });
    }
    if (ok) return edges.sort((a, b) => a.u - b.u || a.v - b.v);
  }
  throw new Error('no simple 3-regular graph drawn');
}
