import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { quiet, readMeter, type CpuMeter } from '../gateway/measure.js';
import { log } from '../gateway/run-context.js';
import type { LoadMessage, RoundRequest, RoundResult, Setup } from './load.js';
import type { CacheOptions } from './options.js';
import type { CacheTarget } from './targets.js';

/*
 * The rounds of `npm run bench -- cache`: a warm-up per target, then rounds of fixed length interleaved across
 * the targets, in turn forwards and backwards (A B C, C B A, ...), with the CPU time every process used during
 * each round read from /proc.
 */

/** The load generator process, sent one round at a time. */
export class CacheLoad {
  readonly #child: ChildProcess;
  #nextId = 1;
  readonly #waiting = new Map<number, (m: LoadMessage) => void>();

  constructor(cwd: string, setup: Omit<Setup, 'type'>) {
    this.#child = fork(fileURLToPath(new URL('./load.ts', import.meta.url)), [], {
      cwd,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.#child.on('message', (m: LoadMessage) => {
      this.#waiting.get(m.id)?.(m);
      this.#waiting.delete(m.id);
    });
    this.#child.on('exit', (code) => {
      for (const [id, resolve] of this.#waiting) resolve({ id, error: `the load generator exited with ${code}` });
      this.#waiting.clear();
    });
    this.#child.send({ type: 'setup', ...setup } satisfies Setup);
  }

  get pid(): number {
    return this.#child.pid!;
  }

  async round(request: Omit<RoundRequest, 'id' | 'type'>): Promise<RoundResult> {
    const id = this.#nextId++;
    const answer = await new Promise<LoadMessage>((resolve) => {
      this.#waiting.set(id, resolve);
      this.#child.send({ type: 'round', id, ...request } satisfies RoundRequest);
    });
    if ('error' in answer) throw new Error(`load generator: ${answer.error}`);
    return answer.result;
  }

  close(): void {
    if (this.#child.connected) this.#child.send({ type: 'exit' });
  }
}

/** One measured round of one target: what the load generator saw, and the CPU ms each meter read meanwhile. */
export interface MeasuredRound {
  target: string;
  load: RoundResult;
  cpuMs: Record<string, number>;
  loadAverage: number;
}

/** Where each round reads CPU time besides the target's own gateways (subgraphs, PostgreSQL, the load generator, the machine). */
export interface Measuring {
  options: CacheOptions;
  load: CacheLoad;
  meters: Record<string, CpuMeter>;
  /** Every server process of the run: a round ends once they are quiet. */
  serving: number[];
}

/** Each target's two gateway processes, as meters named `gateway-1` and `gateway-2`. */
const gatewayMeters = (target: CacheTarget) => Object.fromEntries(target.servers.map((s, i) => [`gateway-${i + 1}`, s.child.pid!]));

async function measureRound(m: Measuring, target: CacheTarget): Promise<MeasuredRound> {
  const meters = { ...m.meters, ...gatewayMeters(target) };
  const before = Object.fromEntries(Object.entries(meters).map(([name, meter]) => [name, readMeter(meter)]));
  const load = await m.load.round({ urls: target.servers.map((s) => s.url), rest: target.rest, seconds: m.options.seconds });
  // The servers finish what the round left in flight before the CPU is read, and before the next round starts.
  await quiet(m.serving);
  const cpuMs = Object.fromEntries(Object.entries(meters).map(([name, meter]) => [name, readMeter(meter) - before[name]!]));
  return { target: target.key, load, cpuMs, loadAverage: loadavg()[0]! };
}

/** A warm-up per target (its answers not counted), then the rounds, interleaved forwards and backwards. */
export async function measureTargets(m: Measuring, targets: CacheTarget[]): Promise<MeasuredRound[]> {
  for (const target of targets) {
    if (m.options.warmup <= 0) continue;
    log(`warming up ${target.key} (${m.options.warmup} s)`);
    await m.load.round({ urls: target.servers.map((s) => s.url), rest: target.rest, seconds: m.options.warmup });
    await quiet(m.serving);
  }
  const rounds: MeasuredRound[] = [];
  for (let r = 0; r < m.options.rounds; r++) {
    const order = r % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      const round = await measureRound(m, target);
      const { reads, writes } = round.load;
      log(
        `round ${r + 1}/${m.options.rounds} ${target.key}: ${Math.round((reads.ok + writes.ok) / round.load.seconds)} requests/s, ` +
          `${reads.errors + writes.errors} errors, ${round.load.stale.stale} stale reads`,
      );
      rounds.push(round);
    }
  }
  return rounds;
}
