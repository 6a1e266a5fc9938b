import { resolve } from 'node:path';
import { ROOT } from '../gateway/run-context.js';
import { WRITE_SHARE } from './workload.js';

/** The targets, in the order the rounds take them. */
const TARGET_KEYS = ['project-cached', 'project-uncached', 'hive-cached'] as const;

/** The command line of `npm run bench -- cache` (the flags are listed in bench/cache.ts). */
export interface CacheOptions {
  seconds: number;
  warmup: number;
  rounds: number;
  /** Clients sending at once, over the target's two gateways (round-robin). */
  concurrency: number;
  tenants: number;
  /** How long after its acknowledgement a write must show in every read (ms). */
  lagMs: number;
  /** The share of requests that write (0.05: the dashboard; 0: reads alone, the cache's ceiling). */
  writeShare: number;
  /** Target keys to run; null: all of them. */
  targets: Set<string> | null;
  /** Where cache.json is written. */
  out: string;
}

export function parseCacheOptions(args: string[]): CacheOptions {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const number = (flag: string, fallback: number, { min = 1, integer = true } = {}) => {
    const raw = value(flag);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
      throw new Error(`${flag} wants ${integer ? 'an integer' : 'a number'} of at least ${min}, not ${raw}`);
    return n;
  };
  const targets = value('--targets')?.split(',');
  const unknown = targets?.filter((key) => !(TARGET_KEYS as readonly string[]).includes(key)) ?? [];
  if (unknown.length > 0) throw new Error(`--targets: no target ${unknown.join(', ')} (${TARGET_KEYS.join(', ')})`);
  return {
    seconds: number('--seconds', 5, { integer: false }),
    warmup: number('--warmup', 2, { min: 0, integer: false }),
    // An even count, so every target goes as often forwards as backwards.
    rounds: number('--rounds', 4),
    concurrency: number('--concurrency', 32),
    tenants: number('--tenants', 4),
    lagMs: number('--lag', 1000, { min: 0 }),
    writeShare: number('--write-share', WRITE_SHARE, { min: 0, integer: false }),
    targets: targets ? new Set(targets) : null,
    out: resolve(value('--out') ?? `${ROOT}bench/results`),
  };
}
