import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { argv, env } from 'node:process';
import { fileURLToPath } from 'node:url';
import { freePort } from './gateway/processes.js';
import { median } from './support/stats.js';

/*
 * `npm run bench -- start [--runs N] [--baseline DIR]`: how long `npm start` takes to answer, as an operator
 * starts it.
 *
 * - "fresh": as on a fresh clone: an empty data directory and an empty temporary directory (so tsx's
 *   cache of transpiled files is empty too).
 * - "second": the same directories again, after the fresh start stopped: what a restart costs.
 *
 * Each start is timed from the spawn of `npm start` to the first 200 on `/health` (polled every 10 ms),
 * and to the first answer of `/health/live` (the port is listening); the CPU its processes used by that
 * 200 (Linux, /proc) is read too: the figure that carries over from a shared, noisy machine. Five starts of
 * each kind by default; the medians are the figures. Only 127.0.0.1.
 *
 * `--baseline DIR`: another checkout of this project (with its node_modules, as `npm ci` left it) started
 * the same way in each run, the two trees in turn (which goes first alternates), so the ratios come from
 * one run on the same machine state. `--node BIN_DIR`: this tree started also with the Node in BIN_DIR
 * (`$(.ci/node-lts)`: Node 24), in turn with the one running the benchmark.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

interface Timing {
  listening: number;
  healthy: number;
  /** CPU time (user and system, every thread) of the start's processes when the first 200 came: null off Linux. */
  cpu: number | null;
}

/**
 * CPU milliseconds used so far by the processes of one process group (npm, its shell and the server it
 * started), read from /proc. Time the machine gave to others is not in it: on a shared, noisy machine
 * it varies far less than the time to answer.
 */
function groupCpuMs(group: number): number | null {
  if (!existsSync('/proc/self/stat')) return null;
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // After the command name (in parentheses, which may hold spaces): state, ppid, pgrp, ... utime (14th
    // field of the line), stime (15th).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== group) continue;
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  // The kernel's clock ticks are 100 a second on Linux (USER_HZ).
  return ticks * 10;
}

async function startOnce(tree: string, dataDir: string, tmp: string, nodeBin: string | null): Promise<Timing> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: tree,
    env: {
      ...env,
      ...(nodeBin ? { PATH: `${nodeBin}:${env['PATH'] ?? ''}` } : {}),
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      TMPDIR: tmp,
      NODE_COMPILE_CACHE: join(tmp, 'compile-cache'),
      LOG_LEVEL: 'warn',
      NODE_ENV: 'production',
    },
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
        if (health?.status === 200) return { listening, healthy: performance.now() - started, cpu: groupCpuMs(child.pid!) };
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    if (!exited) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      process.kill(-child.pid!, 'SIGTERM');
      await gone;
    }
    // npm exits before the server it started has: wait for the whole process group, so no start overlaps
    // the last one's shutdown (and nothing still writes its directories).
    for (;;) {
      try {
        process.kill(-child.pid!, 0);
      } catch {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

interface Starts {
  fresh: Timing[];
  second: Timing[];
}

/**
 * A fresh start and a second one of `tree`, on directories of their own, the module compile cache (Node
 * 22.1+, NODE_COMPILE_CACHE) among them: the fresh one starts without it, as after `npm ci`; the second
 * has what the fresh one left.
 */
async function startPair(tree: string, into: Starts, nodeBin: string | null): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-bench-start-'));
  const dataDir = join(dir, 'data');
  const tmp = mkdtempSync(join(dir, 'tmp-'));
  try {
    into.fresh.push(await startOnce(tree, dataDir, tmp, nodeBin));
    into.second.push(await startOnce(tree, dataDir, tmp, nodeBin));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function run(): Promise<void> {
  const i = argv.indexOf('--runs');
  const runs = i >= 0 ? Number(argv[i + 1]) : 5;
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs wants a positive whole number');
  const b = argv.indexOf('--baseline');
  const baseline = b >= 0 ? resolve(argv[b + 1] ?? '') : null;
  if (baseline && !existsSync(join(baseline, 'node_modules'))) throw new Error(`--baseline ${baseline}: no node_modules there (run npm ci in it first)`);
  const n = argv.indexOf('--node');
  const otherNode = n >= 0 ? resolve(argv[n + 1] ?? '') : null;
  if (otherNode && !existsSync(join(otherNode, 'node'))) throw new Error(`--node ${otherNode}: no node binary there (a bin directory)`);
  const trees: { name: string; dir: string; nodeBin: string | null; starts: Starts }[] = [
    { name: `this tree, Node ${process.version}`, dir: root, nodeBin: null, starts: { fresh: [], second: [] } },
  ];
  if (baseline) trees.push({ name: `baseline (${baseline})`, dir: baseline, nodeBin: null, starts: { fresh: [], second: [] } });
  if (otherNode) trees.push({ name: `this tree, the Node in ${otherNode}`, dir: root, nodeBin: otherNode, starts: { fresh: [], second: [] } });
  for (let r = 0; r < runs; r++) {
    const order = r % 2 === 0 ? trees : [...trees].reverse();
    for (const tree of order) {
      await startPair(tree.dir, tree.starts, tree.nodeBin);
      const { fresh, second } = tree.starts;
      const cpu = (t: Timing) => (t.cpu === null ? '' : `, CPU ${t.cpu} ms`);
      console.log(
        `run ${r + 1} of ${runs}, ${tree.name}: fresh ${fresh.at(-1)!.healthy.toFixed(0)} ms (listening ${fresh.at(-1)!.listening.toFixed(0)}${cpu(fresh.at(-1)!)}), second ${second.at(-1)!.healthy.toFixed(0)} ms (listening ${second.at(-1)!.listening.toFixed(0)}${cpu(second.at(-1)!)})`,
      );
    }
  }
  const middle = (list: Timing[], key: 'listening' | 'healthy') => median(list.map((t) => t[key]));
  const middleCpu = (list: Timing[]) => (list.every((t) => t.cpu !== null) ? median(list.map((t) => t.cpu!)).toFixed(0) : 'n/a');
  console.log(`\n| start | tree | runs | listening, median ms | first 200 on /health, median ms | CPU to the first 200, median ms | goal | met |`);
  console.log('|---|---|---:|---:|---:|---:|---:|---|');
  for (const tree of trees) {
    for (const [name, list, goal] of [
      ['fresh (empty data and temporary directory)', tree.starts.fresh, 4000],
      ['second (same directories)', tree.starts.second, 2000],
    ] as const) {
      const healthy = middle(list, 'healthy');
      console.log(
        `| ${name} | ${tree.name} | ${list.length} | ${middle(list, 'listening').toFixed(0)} | ${healthy.toFixed(0)} | ${middleCpu(list)} | ${goal} | ${healthy <= goal ? 'yes' : 'no'} |`,
      );
    }
  }
  if (baseline) {
    const [here, there] = trees as [(typeof trees)[0], (typeof trees)[0]];
    for (const kind of ['fresh', 'second'] as const) {
      const ratio = middle(here.starts[kind], 'healthy') / middle(there.starts[kind], 'healthy');
      const cpuHere = here.starts[kind].map((t) => t.cpu);
      const cpuThere = there.starts[kind].map((t) => t.cpu);
      const cpuRatio = cpuHere.every((c) => c !== null) && cpuThere.every((c) => c !== null) ? median(cpuHere) / median(cpuThere) : null;
      console.log(
        `${kind}: this tree takes ${ratio.toFixed(2)}x the baseline's time to the first 200 on /health${cpuRatio === null ? '' : ` and ${cpuRatio.toFixed(2)}x its CPU`}`,
      );
    }
  }
}
