import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env } from 'node:process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PrincipalSigner } from '../../platform/principal.js';
import { freePort, startServer, stopServer, type ServerProcess } from './processes.js';

/** The project's root directory (with a trailing slash): where this tree's servers start. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A PostgreSQL schema of the run's own, dropped at the end. */
export interface PostgresSchema {
  url: string;
  schema: string;
}

/**
 * What every phase of one gateway benchmark run shares: its temporary directory (the seeded PGlite template
 * and its copies, the server logs, the profiles), its PostgreSQL schema when there is one, and every server
 * it started; `close` stops them all and removes what the run left.
 */
export class BenchRun {
  readonly tmp = mkdtempSync(join(tmpdir(), 'ops-supergraph-bench-gateway-'));
  /** The seeded PGlite data directory each PGlite server gets a copy of. */
  readonly template = join(this.tmp, 'pglite-template');
  postgres: PostgresSchema | null = null;
  // The subgraph servers serve only calls signed with PRINCIPAL_SECRET: one secret of this run's own for every
  // server, the peers included (they sign with the project's PrincipalSigner, bench/peers).
  readonly #principalSecret = randomBytes(24).toString('base64url');
  readonly signer = PrincipalSigner.from(this.#principalSecret)!;
  readonly #baseEnv = serverEnv(this.#principalSecret);
  readonly #logDir = join(this.tmp, 'logs');
  readonly #servers: ServerProcess[] = [];

  constructor() {
    mkdirSync(this.#logDir);
  }

  /** A copy of the seeded PGlite template, for one server's data directory. */
  copyOfTemplate(name: string): string {
    const dir = join(this.tmp, `data-${name}`);
    cpSync(this.template, dir, { recursive: true });
    return dir;
  }

  /** A server's database: the run's PostgreSQL schema, or a copy of the PGlite template of its own. */
  database(name: string): Record<string, string> {
    return this.postgres ? { DATABASE_URL: this.postgres.url, DATABASE_SCHEMA: this.postgres.schema } : { DATA_DIR: this.copyOfTemplate(name) };
  }

  /** Starts a server process (on `extra.PORT`, or a free port) with the run's environment; `close` stops it. */
  async start(
    name: string,
    args: string[],
    extra: Record<string, string>,
    cwd = ROOT,
    probeHeaders?: (body: string) => Record<string, string>,
  ): Promise<ServerProcess> {
    const port = extra['PORT'] ? Number(extra['PORT']) : await freePort();
    const server = await startServer({
      name,
      args,
      env: { ...this.#baseEnv, ...extra, PORT: String(port) },
      port,
      cwd,
      logDir: this.#logDir,
      startTimeoutMs: 240_000,
      ...(probeHeaders ? { probeHeaders } : {}),
    });
    this.#servers.push(server);
    return server;
  }

  /** Stops every server started, drops the PostgreSQL schema and removes the temporary directory. */
  async close(): Promise<void> {
    await Promise.all(this.#servers.map(stopServer));
    const postgres = this.postgres;
    if (postgres) await dropSchema(postgres.url, postgres.schema).catch((e: unknown) => log(`could not drop schema ${postgres.schema}: ${String(e)}`));
    rmSync(this.tmp, { recursive: true, force: true });
  }
}

/**
 * The environment of every server: as `npm start` runs, with the project's own settings left at their defaults,
 * and this run's PRINCIPAL_SECRET, shared by the subgraph servers and every gateway that calls them.
 */
function serverEnv(principalSecret: string): Record<string, string> {
  const setting =
    /^(PORT|HOST|DATA_DIR|DATABASE_|QUOTE_|API_KEYS|LOG_LEVEL|BODY_LIMIT|BONDING_|FEATURES_|REDIS_URL|FLEET_|OPTIMIZATION_|SUBGRAPH_|PEER_|TRACKING_|WS_|HTTP_|GRAPHQL_|SUPERGRAPH_)/;
  const base = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && !setting.test(e[0])));
  return {
    ...base,
    NODE_ENV: env['NODE_ENV'] ?? 'production',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    APOLLO_TELEMETRY_DISABLED: 'true',
    PRINCIPAL_SECRET: principalSecret,
  };
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

export function log(message: string): void {
  console.log(`[gateway bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}
