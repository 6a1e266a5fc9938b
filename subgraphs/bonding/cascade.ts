/**
 * Cascade error correction (Brassard and Salvail, 1993) between Alice's and Bob's sifted keys. Pass 1
 * splits the key into blocks of k1 = ceil(0.73 / QBER) bits; each later pass doubles the block size over
 * a fresh public permutation. Where Alice's and Bob's block parities differ, a binary search (one parity
 * disclosed per halving) finds and flips one error; every earlier block holding that bit now has odd
 * parity and is searched in turn (the cascade). Every parity Alice discloses is counted as leaked, since
 * privacy amplification must remove it. Alice's key is read only for the parities she would disclose.
 */

export interface Uint32Source {
  uint32(): number;
}

export interface CascadeResult {
  /** Bob's key after correction. */
  corrected: Uint8Array;
  /** Parity bits disclosed by Alice. */
  leakedBits: number;
  /** Bits Bob flipped. */
  flips: number;
  passes: number;
  firstBlockSize: number;
}

export function cascade(alice: Uint8Array, bobIn: Uint8Array, qber: number, rng: Uint32Source, passes = 4): CascadeResult {
  const n = alice.length;
  const bob = Uint8Array.from(bobIn);
  const k1 = Math.max(4, Math.min(n, Math.ceil(0.73 / Math.max(qber, 0.001))));
  const perms: Int32Array[] = [];
  const where: Int32Array[] = [];
  const sizes: number[] = [];
  /** Alice's disclosed parity per block and pass (-1: not disclosed yet). */
  const aliceParity: Int8Array[] = [];
  let leaked = 0;
  let flips = 0;

  const parity = (key: Uint8Array, pass: number, from: number, to: number) => {
    const perm = perms[pass]!;
    let s = 0;
    for (let t = from; t < to; t++) s ^= key[perm[t]!]!;
    return s;
  };
  const blockRange = (pass: number, block: number): [number, number] => [block * sizes[pass]!, Math.min(n, (block + 1) * sizes[pass]!)];

  /** Binary search in an odd block; returns the key index it flipped. */
  const fix = (pass: number, block: number): number => {
    let [lo, hi] = blockRange(pass, block);
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      leaked++;
      if (parity(alice, pass, lo, mid) !== parity(bob, pass, lo, mid)) hi = mid;
      else lo = mid;
    }
    const index = perms[pass]![lo]!;
    bob[index] = bob[index]! ^ 1;
    flips++;
    return index;
  };

  /** After flipping `index`, every disclosed block holding it whose parity no longer matches is searched. */
  const cascadeFrom = (index: number, upToPass: number) => {
    const queue: [number, number][] = [];
    const enqueue = (bit: number) => {
      for (let p = 0; p <= upToPass; p++) {
        const block = Math.floor(where[p]![bit]! / sizes[p]!);
        if (aliceParity[p]![block] === -1) continue;
        queue.push([p, block]);
      }
    };
    enqueue(index);
    while (queue.length > 0) {
      const [p, block] = queue.pop()!;
      const [from, to] = blockRange(p, block);
      if (parity(bob, p, from, to) === aliceParity[p]![block]) continue;
      enqueue(fix(p, block));
    }
  };

  for (let pass = 0; pass < passes; pass++) {
    const size = Math.min(n, k1 * 2 ** pass);
    const perm = new Int32Array(n);
    for (let i = 0; i < n; i++) perm[i] = i;
    if (pass > 0) {
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor((rng.uint32() / 4294967296) * (i + 1));
        const t = perm[i]!;
        perm[i] = perm[j]!;
        perm[j] = t;
      }
    }
    const inv = new Int32Array(n);
    for (let t = 0; t < n; t++) inv[perm[t]!] = t;
    perms.push(perm);
    where.push(inv);
    sizes.push(size);
    const blocks = Math.ceil(n / size);
    aliceParity.push(new Int8Array(blocks).fill(-1));
    for (let block = 0; block < blocks; block++) {
      const [from, to] = blockRange(pass, block);
      const a = parity(alice, pass, from, to);
      aliceParity[pass]![block] = a;
      leaked++;
      if (a !== parity(bob, pass, from, to)) cascadeFrom(fix(pass, block), pass);
    }
  }
  return { corrected: bob, leakedBits: leaked, flips, passes, firstBlockSize: k1 };
}
