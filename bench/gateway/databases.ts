import { env } from 'node:process';
import pg from 'pg';
import type { Options } from './options.js';
import { log, type BenchRun, type PostgresSchema } from './run-context.js';
import { POOL_PER_TARGET, seedDatabase } from './seed.js';

const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Seeds the run's databases with the same rows: the PGlite template every PGlite server gets a copy of, and a
 * PostgreSQL schema of the run's own (BENCH_DATABASE_URL, or the local server when it answers), set on `run`
 * before it is seeded so that it is dropped at the end whatever happens.
 */
export async function seedDatabases(run: BenchRun, options: Options): Promise<void> {
  run.postgres = await postgresSchema('bench_gateway');
  // Six targets at most, 150 machines each from EQ-100: the pool fills the ids up to EQ-999.
  const plan = { bookings: options.bookings, poolMachines: 6 * POOL_PER_TARGET };
  log(`seeding ${plan.bookings} bookings and ${plan.poolMachines} pool machines: PGlite${run.postgres ? ` and PostgreSQL schema ${run.postgres.schema}` : ''}`);
  await seedDatabase({ dataDir: run.template }, plan);
  if (run.postgres) await seedDatabase(run.postgres, plan);
}

/** The database server runs on this machine (its processes can be measured here). */
export function isLocal(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]' || host === '';
}

/**
 * A schema of the run's own (`<prefix>_<time>`, not created yet) on BENCH_DATABASE_URL, or on the local server
 * when it answers; null without either.
 */
export async function postgresSchema(prefix: string): Promise<PostgresSchema | null> {
  const url = await postgresUrl();
  return url ? { url, schema: `${prefix}_${Date.now().toString(36)}` } : null;
}

async function postgresUrl(): Promise<string | null> {
  const url = env['BENCH_DATABASE_URL'] ?? LOCAL_POSTGRES;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return url;
  } catch (error) {
    if (env['BENCH_DATABASE_URL']) throw new Error(`BENCH_DATABASE_URL does not answer: ${String(error)}`, { cause: error });
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}
