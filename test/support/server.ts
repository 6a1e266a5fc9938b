import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { loadConfig } from '../../platform/config.js';
import type { Clock } from '../../platform/clock.js';
import type { Database } from '../../platform/db.js';
import type { EventHub } from '../../platform/event-hub.js';
import { startServer, type RunningServer } from '../../gateway/server.js';
import { startSubgraphServer, type RunningSubgraphServer } from '../../gateway/subgraph-server.js';
import type { SubgraphInstance, SubgraphModule } from '../../platform/subgraph.js';
import { subgraphs as allSubgraphs } from '../../subgraphs/registry.js';

export type Backend = 'pglite' | 'postgres';

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (CI sets it when a server answers). */
export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] || undefined;
export const backends: Backend[] = TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

/** One process (subgraphs inside the gateway), or distributed (each subgraph its own server, over HTTP/WS). */
export type Mode = 'one-process' | 'distributed';
export const modes: Mode[] = ['one-process', 'distributed'];
/** Every backend in every mode: the end-to-end suites run on each. */
export const targets = backends.flatMap((backend) => modes.map((mode) => ({ backend, mode, name: `${backend}, ${mode}` })));

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
  /** @default 'one-process' */
  mode?: Mode;
  /** The subgraphs to run (a test swaps one for a failing stand-in). @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
}

export type TestServer = Omit<RunningServer, 'db' | 'events'> & {
  /** The database the subgraphs use (the gateway's, or in distributed mode the subgraph servers'). */
  db: Database;
  events: EventHub;
  schema?: string;
  /** Distributed mode: the subgraph servers, by name. */
  subgraphServers: ReadonlyMap<string, RunningSubgraphServer>;
};

/**
 * Starts the real server on 127.0.0.1:0 (in distributed mode, each subgraph's server too, and the gateway
 * pointed at them with SUBGRAPH_URLS); everything is closed after the file's tests.
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const backend = options.backend ?? 'pglite';
  if (backend === 'postgres' && !TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const schema = backend === 'postgres' ? (options.schema ?? `t_${randomBytes(6).toString('hex')}`) : undefined;
  const env = {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    ...(backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL, DATABASE_SCHEMA: schema } : {}),
    ...options.env,
  };
  const clock = options.clock ? { clock: options.clock } : {};
  const modules = options.subgraphs ?? allSubgraphs;
  const subgraphServers = new Map<string, RunningSubgraphServer>();
  if (options.mode === 'distributed') {
    // Subgraphs share one database as they would in production (PGlite: each its own in-memory one).
    for (const module of modules) subgraphServers.set(module.name, await startSubgraphServer({ config: loadConfig(env), module, ...clock }));
  }
  const urls = [...subgraphServers].map(([name, s]) => `${name}=${s.graphqlUrl}`).join(',');
  const server = await startServer({ config: loadConfig({ ...env, ...(urls ? { SUBGRAPH_URLS: urls } : {}) }), subgraphs: modules, ...clock });
  const instances = new Map<string, SubgraphInstance>(server.subgraphs);
  for (const [name, s] of subgraphServers) instances.set(name, s.runtime.instances.get(name)!);
  const close = async () => {
    running.delete(handle);
    await server.close();
    for (const s of subgraphServers.values()) await s.close();
    if (schema && !options.schema) await dropSchema(schema);
  };
  const runtime = subgraphServers.values().next().value?.runtime;
  const db = server.db ?? runtime?.db;
  const events = server.events ?? runtime?.events;
  if (!db || !events) throw new Error('no subgraph runs with a database');
  const handle: TestServer = { ...server, db, events, subgraphs: instances, subgraphServers, close, ...(schema ? { schema } : {}) };
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
