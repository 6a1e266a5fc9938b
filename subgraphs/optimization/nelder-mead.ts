export interface NelderMeadOptions {
  /** Function evaluations allowed (the starting simplex included). */
  maxEvaluations: number;
  /** Size of the first simplex along each axis. @default 0.1 */
  step?: number;
  /** Stop when the simplex's values differ by less than this. @default 1e-7 */
  tolerance?: number;
}

export interface NelderMeadResult {
  x: number[];
  value: number;
  evaluations: number;
}

/**
 * Nelder-Mead simplex MINIMIZATION (standard coefficients: reflection 1, expansion 2, contraction 0.5,
 * shrink 0.5). Derivative-free, which suits a sampled or simulated objective.
 */
export function nelderMead(f: (x: number[]) => number, start: readonly number[], options: NelderMeadOptions): NelderMeadResult {
  const d = start.length;
  const step = options.step ?? 0.1;
  const tolerance = options.tolerance ?? 1e-7;
  let evaluations = 0;
  const evaluate = (x: number[]) => {
    evaluations++;
    return f(x);
  };
  let simplex: { x: number[]; v: number }[] = [{ x: [...start], v: evaluate([...start]) }];
  for (let i = 0; i < d && evaluations < options.maxEvaluations; i++) {
    const x = [...start];
    x[i]! += step;
    simplex.push({ x, v: evaluate(x) });
  }
  const combine = (a: number[], b: number[], t: number) => a.map((ai, i) => ai + t * (b[i]! - ai));
  while (simplex.length === d + 1 && evaluations < options.maxEvaluations) {
    simplex.sort((a, b) => a.v - b.v);
    const best = simplex[0]!;
    const worst = simplex[d]!;
    if (Math.abs(worst.v - best.v) < tolerance) break;
    const centroid = new Array<number>(d).fill(0);
    for (let k = 0; k < d; k++) for (let i = 0; i < d; i++) centroid[i]! += simplex[k]!.x[i]! / d;
    const reflected = combine(centroid, worst.x, -1);
    const vr = evaluate(reflected);
    if (vr < best.v) {
      const expanded = combine(centroid, worst.x, -2);
      const ve = evaluations < options.maxEvaluations ? evaluate(expanded) : Infinity;
      simplex[d] = ve < vr ? { x: expanded, v: ve } : { x: reflected, v: vr };
      continue;
    }
    if (vr < simplex[d - 1]!.v) {
      simplex[d] = { x: reflected, v: vr };
      continue;
    }
    if (evaluations >= options.maxEvaluations) break;
    const outside = vr < worst.v;
    const contracted = outside ? combine(centroid, reflected, 0.5) : combine(centroid, worst.x, 0.5);
    const vc = evaluate(contracted);
    if (vc < Math.min(vr, worst.v)) {
      simplex[d] = { x: contracted, v: vc };
      continue;
    }
    simplex = simplex.map((p, k) => {
      if (k === 0 || evaluations >= options.maxEvaluations) return p;
      const x = combine(best.x, p.x, 0.5);
      return { x, v: evaluate(x) };
    });
  }
  simplex.sort((a, b) => a.v - b.v);
  return { x: simplex[0]!.x, value: simplex[0]!.v, evaluations };
}
