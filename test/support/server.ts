import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { loadConfig } from '../../platform/config.js';
import type { Clock } from '../../platform/clock.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { startServer, type RunningServer } from '../../gateway/server.js';

export type Backend = 'pglite' | 'postgres';

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (CI sets it when a server answers). */
export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] || undefined;
export const backends: Backend[] = TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

const running = new Set<{ close(): Promise<void> }>();
afterAll(async () => {
  await Promise.all([...running].map((s) => s.close()));
});

export interface TestServerOptions {
  backend?: Backend;
  env?: Record<string, string>;
  clock?: Clock;
  /** Reuse a PostgreSQL schema (restart tests; the caller drops it); a fresh one, dropped at close, otherwise. */
  schema?: string;
  /** The subgraphs to run (a test swaps one for a failing stand-in). @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
}

/** Starts the real server on 127.0.0.1:0; it is closed after the file's tests. */
export async function startTestServer(options: TestServerOptions = {}): Promise<RunningServer & { schema?: string }> {
  const backend = options.backend ?? 'pglite';
  if (backend === 'postgres' && !TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const schema = backend === 'postgres' ? (options.schema ?? `t_${randomBytes(6).toString('hex')}`) : undefined;
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    ...(backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL } : {}),
    ...options.env,
  });
  const server = await startServer({
    config,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(schema ? { databaseSchema: schema } : {}),
    ...(options.subgraphs ? { subgraphs: options.subgraphs } : {}),
  });
  const close = async () => {
    running.delete(server);
    await server.close();
    if (schema && !options.schema) await dropSchema(schema);
  };
  const handle = { ...server, close, ...(schema ? { schema } : {}) };
  running.add(handle);
  return handle;
}

export async function dropSchema(schema: string): Promise<void> {
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.end();
}
