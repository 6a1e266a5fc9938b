import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './port.js';
import { until } from './wait.js';

/*
 * A nats-server with JetStream of a test's own: a free port on 127.0.0.1 and a store directory of its
 * own, so stopping or restarting it disturbs nothing else. Debian's package `nats-server` (.ci/run installs
 * it when missing), or NATS_SERVER_PATH.
 */

const CANDIDATES = [process.env['NATS_SERVER_PATH'], '/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server'];

/** The nats-server binary, or null when none is installed. */
export const NATS_SERVER =
  CANDIDATES.find((p): p is string => !!p && existsSync(p)) ?? (spawnSync('nats-server', ['--version']).status === 0 ? 'nats-server' : null);

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

export class TestNats {
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly storeDir: string,
  ) {}

  static async start(): Promise<TestNats> {
    if (!NATS_SERVER) throw new Error('no nats-server installed');
    const nats = new TestNats(await freePort(), mkdtempSync(join(tmpdir(), 'nats-')));
    await nats.up();
    return nats;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again) on its port and store: JetStream keeps what it had. */
  async up(): Promise<void> {
    this.child = spawn(NATS_SERVER!, ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.storeDir], { stdio: 'ignore' });
    await until(() => accepts(this.port), `nats-server on ${this.port} to accept connections`);
  }

  /** Stops it at once (SIGKILL: no goodbye to its clients). */
  async down(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async close(): Promise<void> {
    await this.down();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}
