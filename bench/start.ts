import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argv, env } from 'node:process';
import { fileURLToPath } from 'node:url';
import { freePort } from './gateway/processes.js';
import { median } from './support/stats.js';

/*
 * `npm run bench -- start [--runs N]`: how long `npm start` takes to answer, as an operator starts it.
 *
 * - "fresh": as on a fresh clone: an empty data directory and an empty temporary directory (so tsx's
 *   cache of transpiled files is empty too).
 * - "second": the same directories again, after the fresh start stopped: what a restart costs.
 *
 * Each start is timed from the spawn of `npm start` to the first 200 on `/health` (polled every 10 ms),
 * and to the first answer of `/health/live` (the port is listening). Five starts of each kind by default;
 * the medians are the figures. Only 127.0.0.1.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

interface Timing {
  listening: number;
  healthy: number;
}

async function startOnce(dataDir: string, tmp: string): Promise<Timing> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: root,
    env: { ...env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, TMPDIR: tmp, LOG_LEVEL: 'warn', NODE_ENV: 'production' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  let exited = false;
  child.once('exit', () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  let listening = 0;
  try {
    for (;;) {
      if (exited) throw new Error(`npm start exited before /health answered 200:\n${stderr}`);
      if (performance.now() - started > 120_000) throw new Error('npm start: no 200 on /health within 120 s');
      if (!listening) {
        const live = await fetch(`${url}/health/live`).catch(() => null);
        if (live) {
          await live.arrayBuffer();
          listening = performance.now() - started;
        }
      }
      if (listening) {
        const health = await fetch(`${url}/health`).catch(() => null);
        if (health) await health.arrayBuffer();
        if (health?.status === 200) return { listening, healthy: performance.now() - started };
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    if (!exited) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      process.kill(-child.pid!, 'SIGTERM');
      await gone;
    }
  }
}

export default async function run(): Promise<void> {
  const i = argv.indexOf('--runs');
  const runs = i >= 0 ? Number(argv[i + 1]) : 5;
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs wants a positive whole number');
  const fresh: Timing[] = [];
  const second: Timing[] = [];
  for (let r = 0; r < runs; r++) {
    const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-bench-start-'));
    const dataDir = join(dir, 'data');
    const tmp = mkdtempSync(join(dir, 'tmp-'));
    try {
      fresh.push(await startOnce(dataDir, tmp));
      second.push(await startOnce(dataDir, tmp));
      console.log(
        `run ${r + 1} of ${runs}: fresh ${fresh.at(-1)!.healthy.toFixed(0)} ms (listening ${fresh.at(-1)!.listening.toFixed(0)}), second ${second.at(-1)!.healthy.toFixed(0)} ms (listening ${second.at(-1)!.listening.toFixed(0)})`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const middle = (list: Timing[], key: keyof Timing) => median(list.map((t) => t[key]));
  console.log(`\n| start | runs | listening, median ms | first 200 on /health, median ms | goal | met |`);
  console.log('|---|---:|---:|---:|---:|---|');
  for (const [name, list, goal] of [
    ['fresh (empty data and tsx cache)', fresh, 4000],
    ['second (same directories)', second, 2000],
  ] as const) {
    const healthy = middle(list, 'healthy');
    console.log(`| ${name} | ${list.length} | ${middle(list, 'listening').toFixed(0)} | ${healthy.toFixed(0)} | ${goal} | ${healthy <= goal ? 'yes' : 'no'} |`);
  }
}
