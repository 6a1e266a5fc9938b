import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { startServer, type RunningServer } from '../../gateway/server.js';
import { startSubgraphServer, type RunningSubgraphServer } from '../../gateway/subgraph-host/server.js';
import { loadConfig } from '../../gateway/config.js';
import { dropSchema, TEST_DATABASE_URL, type Backend, type Mode } from './server.js';

/**
 * The supergraph with the features subgraph in process (one-process) or as its own server that the gateway
 * reaches over HTTP (distributed; the other subgraphs stay in the gateway, as SUBGRAPH_URLS allows), on
 * PGlite or PostgreSQL. Closed after the file's tests.
 */
export interface FeaturesTestServer {
  url: string;
  gateway: RunningServer;
  /** Distributed mode: the features subgraph's own server. */
  remote: RunningSubgraphServer | null;
  close(): Promise<void>;
}

const running = new Set<FeaturesTestServer>();
afterAll(async () => {
  await Promise.all([...running].map((s) => s.close()));
});

export async function startFeaturesServer(options: { backend: Backend; mode: Mode; env?: Record<string, string> }): Promise<FeaturesTestServer> {
  const schema = options.backend === 'postgres' ? `t_${randomBytes(6).toString('hex')}` : undefined;
  if (options.backend === 'postgres' && !TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const env: Record<string, string> = {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    FEATURES_DATA_DIR: ':memory:',
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    ...(schema ? { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema } : {}),
    // Distributed: the gateway and its subgraph server share a secret (signed calls only).
    ...(options.mode === 'distributed' ? { PRINCIPAL_SECRET: randomBytes(24).toString('base64url') } : {}),
    ...options.env,
  };
  const { features } = await import('../../subgraphs/features/index.js');
  const remote = options.mode === 'distributed' ? await startSubgraphServer({ config: loadConfig(env), module: features }) : null;
  const gateway = await startServer({ config: loadConfig({ ...env, ...(remote ? { SUBGRAPH_URLS: `features=${remote.graphqlUrl}` } : {}) }) });
  let closing: Promise<void> | undefined;
  const handle: FeaturesTestServer = {
    url: gateway.url,
    gateway,
    remote,
    close() {
      closing ??= (async () => {
        running.delete(handle);
        await gateway.close();
        await remote?.close();
        if (schema) await dropSchema(schema);
      })();
      return closing;
    },
  };
  running.add(handle);
  return handle;
}
