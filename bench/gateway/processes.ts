import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A server the benchmark started as a process of its own, with its output in a log file: its CPU time and
 * peak resident set are read from /proc by pid, so each process is measured apart from the others.
 */
export interface ServerProcess {
  name: string;
  url: string;
  child: ChildProcess;
  log: string;
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

export interface StartOptions {
  name: string;
  /** Arguments after the node executable (`--import tsx gateway/main.ts`, a script, its flags). */
  args: string[];
  env: Record<string, string | undefined>;
  port: number;
  cwd: string;
  logDir: string;
  /** How long the server may take to answer its first GraphQL request. */
  startTimeoutMs: number;
  /** Headers for the readiness request, given its body: a subgraph server answers only a signed one. */
  probeHeaders?: (body: string) => Record<string, string>;
}

/** Starts a server process and waits until `POST /graphql { __typename }` answers 200. */
export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const log = join(options.logDir, `${options.name}.log`);
  const out = createWriteStream(log);
  const child = spawn(process.execPath, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  const url = `http://127.0.0.1:${options.port}`;
  const server = { name: options.name, url, child, log };
  const deadline = Date.now() + options.startTimeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${options.name} exited with ${child.exitCode} while starting; see ${log}:\n${tail(log)}`);
    if (await answersGraphql(url, options.probeHeaders)) return server;
    if (Date.now() > deadline) {
      await stopServer(server);
      throw new Error(`${options.name} did not answer within ${options.startTimeoutMs} ms; see ${log}:\n${tail(log)}`);
    }
    await sleep(200);
  }
}

async function answersGraphql(url: string, probeHeaders?: (body: string) => Record<string, string>): Promise<boolean> {
  const body = '{"query":"{ __typename }"}';
  try {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...probeHeaders?.(body) },
      body,
      signal: AbortSignal.timeout(2000),
    });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after 10 s; resolves when the process has exited. */
export function stopServer(server: { child: ChildProcess }): Promise<void> {
  const { child } = server;
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * A process's /proc/<pid>/stat: its command name and the fields after it (which start at field 3: the name may
 * hold spaces); null once it has exited.
 */
function procStat(pid: number | string): { command: string; fields: string[] } | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const close = stat.lastIndexOf(')');
  return { command: stat.slice(stat.indexOf('(') + 1, close), fields: stat.slice(close + 2).split(' ') };
}

/** Clock ticks to milliseconds. */
const ticksMs = (ticks: number) => (ticks * 1000) / TICKS_PER_SECOND;

/** CPU time (user + system: fields 14 and 15) the process has used so far, in milliseconds. */
export function cpuMs(pid: number): number {
  const stat = procStat(pid);
  if (!stat) throw new Error(`process ${pid} has exited`);
  return ticksMs(Number(stat.fields[11]) + Number(stat.fields[12]));
}

/**
 * CPU time (user + system) the local PostgreSQL server has used so far, in milliseconds: every process named
 * `postgres` (the postmaster, its backends and workers), plus what the postmaster's children that have exited
 * used (its cutime and cstime), so a backend that ends between two readings is still counted once. Null when
 * no such process can be read (PostgreSQL on another machine, PGlite).
 */
export function postgresCpuMs(): number | null {
  let ticks = 0;
  let found = false;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(entry);
    if (stat?.command !== 'postgres') continue;
    // utime, stime, cutime, cstime: fields 14 to 17.
    ticks += Number(stat.fields[11]) + Number(stat.fields[12]) + Number(stat.fields[13]) + Number(stat.fields[14]);
    found = true;
  }
  return found ? ticksMs(ticks) : null;
}

/**
 * CPU time the whole machine has spent busy so far, in milliseconds over all cores (/proc/stat: user, nice,
 * system, irq and softirq; idle, iowait and steal left out): every process, the kernel's network work that no
 * process is charged for, and anything else running here.
 */
export function machineCpuMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  return ticksMs(user + nice + system + irq + softirq);
}

/** Peak resident set (VmHWM) since the start or the last `resetPeakRss`, in MiB. */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

/**
 * Resets the peak resident set to the current one (Linux `clear_refs` value 5), so a workload's peak is
 * its own; false where the kernel or permissions do not allow it (the peak is then the process's lifetime's).
 */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** One free-port helper for the tests and the benchmarks. */
export { freePort } from '../../test/support/port.js';

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
