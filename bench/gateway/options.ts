import { join } from 'node:path';
import { ROOT } from './run-context.js';

/** The command line of `npm run bench -- gateway` (the flags are listed in bench/gateway.ts). */
export interface Options {
  quick: boolean;
  seconds: number;
  warmup: number;
  rounds: number;
  connections: number;
  /** Rows the paging workload reads per target, over all rounds (by default 200,000: a million over five targets). */
  pagingRows: number;
  bookings: number;
  only: Set<string> | null;
  /** Target keys to run (`project`, `project-baseline`, `one-process-pglite`, ...); null: all of them. */
  targets: Set<string> | null;
  profileSeconds: number;
  /** Profile on the mix of distinct queries instead of the federated query. */
  profileMix: boolean;
  out: string | null;
  /** Another checkout whose gateway and one-process server run beside this tree's (in place of the peers). */
  baseline: string | null;
  /** Environment of the baseline's servers only (`--baseline-env USAGE_RECORDING=false`): one tree, two settings. */
  baselineEnv: Record<string, string>;
  /** Environment of this tree's servers only (`--env`): with `--baseline-env`, a crossed-over measurement. */
  treeEnv: Record<string, string>;
}

const WORKLOADS = ['federated', 'shallow', 'federated-unshared', 'shallow-unshared', 'mix', 'rest', 'batched', 'paging', 'mutations'] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
/** The workloads run with nothing shared between requests, on targets of their own. */
const UNSHARED_WORKLOADS: readonly string[] = ['federated-unshared', 'shallow-unshared'];

export function parseOptions(args: string[]): Options {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const number = (flag: string, fallback: number) => {
    const raw = value(flag);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} wants a positive number, not ${raw}`);
    return n;
  };
  const quick = args.includes('--quick');
  const only = value('--only')?.split(',');
  for (const name of only ?? []) if (!(WORKLOADS as readonly string[]).includes(name)) throw new Error(`--only: no workload ${name} (${WORKLOADS.join(', ')})`);
  return {
    quick,
    seconds: number('--seconds', quick ? 3 : 5),
    warmup: number('--warmup', quick ? 2 : 2),
    // An even count, so every target goes as often forwards as backwards.
    rounds: number('--rounds', quick ? 1 : 4),
    connections: number('--connections', 50),
    pagingRows: number('--paging-rows', quick ? 20_000 : 200_000),
    bookings: quick ? 2_000 : 10_000,
    only: only ? new Set(only) : null,
    targets: value('--targets') ? new Set(value('--targets')!.split(',')) : null,
    profileSeconds: number('--profile-seconds', quick ? 3 : 8),
    profileMix: args.includes('--profile-mix'),
    // bench/results holds the comparison with the peers: a quick run or a baseline run writes nothing unless asked.
    out: value('--out') ?? (quick || args.includes('--baseline') ? null : join(ROOT, 'bench', 'results')),
    baseline: value('--baseline') ?? null,
    baselineEnv: envOption(value('--baseline-env'), '--baseline-env'),
    treeEnv: envOption(value('--env'), '--env'),
  };
}

function envOption(raw: string | undefined, flag: string): Record<string, string> {
  return Object.fromEntries(
    (raw?.split(',') ?? []).map((pair) => {
      const [name, ...rest] = pair.split('=');
      if (!name || rest.length === 0) throw new Error(`${flag} wants NAME=value[,NAME=value], not ${pair}`);
      return [name, rest.join('=')];
    }),
  );
}

/** Whether the run measures workload `w` (`--only`). */
export function wanted(options: Options, w: WorkloadName): boolean {
  return !options.only || options.only.has(w);
}

/** Whether the run measures a nothing-shared workload, and so starts the nothing-shared targets. */
export function unsharedWanted(options: Options): boolean {
  return !options.only || UNSHARED_WORKLOADS.some((w) => options.only!.has(w));
}
