import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { within } from './wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A server started as `npm start` / `npm run subgraph` would (node + tsx), with its output kept. */
export interface ServerProcess {
  child: ChildProcess;
  pid: number;
  /** Everything written to stdout. */
  stdout(): string;
  /** Everything written to stderr. */
  stderr(): string;
  /** Resolves with the base URL once the server logs that it serves; rejects if it exits first. */
  serving: Promise<string>;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  exited: Promise<number | string>;
}

const started = new Set<ServerProcess>();
afterAll(async () => {
  await Promise.all(
    [...started].map((p) => {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      return p.exited;
    }),
  );
});

/**
 * Spawns `entry` (a path under the repository: `gateway/main.ts` under tsx, or `tools/start.mjs`, the compiled
 * server `npm start` runs) with `env` over a minimal environment.
 */
export function startProcess(entry: string, env: Record<string, string>, args: string[] = []): ServerProcess {
  const loader = entry.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...loader, entry, ...args], {
    cwd: root,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const serving = new Promise<string>((resolve, reject) => {
    const look = () => {
      const match = /serving GraphQL at (http:\/\/[^\s"/]+)/.exec(out);
      if (match) resolve(match[1]!);
    };
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      look();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    void exited.then((code) => reject(new Error(`${entry} exited (${code}) before serving:\n${err}\n${out.slice(-2000)}`)));
  });
  serving.catch(() => undefined);
  const handle: ServerProcess = { child, pid: child.pid!, stdout: () => out, stderr: () => err, serving, exited };
  started.add(handle);
  return handle;
}

/** Stops a process with `signal` (SIGKILL: no shutdown, its sockets simply drop) and resolves with its exit code or signal. */
export function stopProcess(p: ServerProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | string | undefined> {
  if (!p) return Promise.resolve(undefined);
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill(signal);
  return p.exited;
}

/** A gateway process with the base URL it serves. */
export type GatewayProcess = ServerProcess & { url: string };

/**
 * `npm start` as its own process (node + tsx) on a free port, with the test's own environment under `env`;
 * resolves once it serves (within 120 s: tsx compiles the gateway at start on a busy machine).
 */
export async function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  const p = startProcess('gateway/main.ts', { ...inherited, PORT: '0', ...env });
  return { ...p, url: await within(p.serving, 'the gateway process to serve', 120_000) };
}
