import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './port.js';
import { until } from './wait.js';

/*
 * A PostgreSQL server of a test's own: a cluster made by `initdb` in a temporary directory, listening on a
 * free port of 127.0.0.1 only, so stopping or restarting it disturbs no other test and no other user of the
 * machine's PostgreSQL. Debian's server binaries (/usr/lib/postgresql/<version>/bin, or PG_BIN). PostgreSQL
 * refuses to run as root; as root the cluster belongs to the `postgres` user and its commands run as that user.
 */

function findBin(): string | null {
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv && existsSync(join(fromEnv, 'initdb'))) return fromEnv;
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return null;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'initdb')) && existsSync(join(base, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(base, versions[0], 'bin') : null;
}

const isRoot = process.getuid?.() === 0;
const hasPostgresUser = !isRoot || spawnSync('id', ['-u', 'postgres']).status === 0;

/** The directory of initdb and pg_ctl, or null when this machine cannot run a PostgreSQL server of a test's own. */
export const PG_BIN = hasPostgresUser ? findBin() : null;

export class TestPostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  /** A new cluster, started; its database `test` is empty. */
  static async start(): Promise<TestPostgres> {
    if (!PG_BIN) throw new Error("no PostgreSQL server binaries (initdb, pg_ctl) to start one of the test's own");
    const dir = mkdtempSync(join(tmpdir(), 'pg-'));
    // The cluster's owner must be able to reach its directory.
    chmodSync(dir, 0o777);
    const server = new TestPostgres(await freePort(), dir);
    server.run('initdb', ['-D', server.data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await server.up();
    const client = new pg.Client({ connectionString: server.adminUrl });
    await client.connect();
    await client.query('CREATE DATABASE test');
    await client.end();
    return server;
  }

  private get data(): string {
    return join(this.dir, 'data');
  }

  private get adminUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/test`;
  }

  private run(command: string, args: string[]): void {
    const bin = join(PG_BIN!, command);
    if (isRoot) execFileSync('runuser', ['-u', 'postgres', '--', bin, ...args], { stdio: 'ignore' });
    else execFileSync(bin, args, { stdio: 'ignore' });
  }

  /** Starts the server (again) on its port and data: what was committed is there. */
  async up(): Promise<void> {
    const options = `-p ${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c fsync=off -c max_connections=200`;
    this.run('pg_ctl', ['-D', this.data, '-o', options, '-l', join(this.dir, 'log'), '-w', '-t', '60', 'start']);
    await until(async () => {
      const client = new pg.Client({ connectionString: this.adminUrl });
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    }, `PostgreSQL on ${this.port} to accept connections`);
  }

  /**
   * Stops it the way a crash or a failover does (`pg_ctl stop -m immediate`): every connection is cut, no
   * checkpoint; the next start recovers from the write-ahead log.
   */
  down(): void {
    this.run('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
  }

  async close(): Promise<void> {
    try {
      this.down();
    } catch {
      // Already stopped.
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
