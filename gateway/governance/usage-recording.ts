import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { GraphQLSchema } from 'graphql';
import { platformConfig, sectionOf, type PlatformConfig } from '../../platform/config.js';
import { openDatabase, type Database } from '../../platform/db.js';
import { migrate } from '../../platform/migrate.js';
import type { OperationPolicy } from '../pipeline/operation-policy.js';
import { governanceConfig, type GovernanceConfig } from './config.js';
import { registerUsageRoute } from './route.js';
import { MemoryUsageStore, SqlUsageStore, USAGE_MIGRATIONS, UsageRecorder, type UsageStore } from './usage.js';

export interface UsagePluginOptions {
  config: PlatformConfig & GovernanceConfig;
  /** The schema clients see now (a reload swaps it): coordinates are looked up in it. */
  schema: () => GraphQLSchema;
  /** The supergraph SDL served now, for /admin/supergraph. */
  supergraphSdl: () => string;
}

/**
 * The `usage` part: which client used which field (gateway/governance/usage.ts), counted in memory and added
 * up every USAGE_FLUSH_S and at close (`app.usage`, null with USAGE_RECORDING=false), and its routes
 * (/admin/usage, /admin/supergraph). Counts go to the subgraphs' database when they run in this process,
 * otherwise to DATABASE_URL's (a table of its own), or, for a gateway without a database, stay in this
 * process's memory.
 */
export const usagePlugin = fp(
  async (app: FastifyInstance, options: UsagePluginOptions) => {
    const config = { ...sectionOf(platformConfig, options.config, 'usage'), ...sectionOf(governanceConfig, options.config, 'usage') };
    const usage = config.USAGE_RECORDING ? await startUsage(app, config, options.schema) : null;
    app.decorate('usage', usage);
    const retentionMs = config.USAGE_RETENTION_DAYS * 86_400_000;
    registerUsageRoute(app, { usage, schema: options.schema, retentionMs, supergraphSdl: options.supergraphSdl });
  },
  { name: 'usage', fastify: '5.x', dependencies: ['subgraphs'] },
);

/** The pipeline's usage step: counts every operation resolved, once its document is known to be valid. */
export function usagePolicy(recorder: UsageRecorder): OperationPolicy {
  return {
    resolved({ context, source, document, operationName, variables }) {
      recorder.record({ ...context.client, principal: context.principal }, source, document, operationName, variables, context.route);
    },
  };
}

async function startUsage(app: FastifyInstance, config: PlatformConfig & GovernanceConfig, schema: () => GraphQLSchema): Promise<UsageRecorder> {
  const usage = new UsageRecorder({
    store: await usageStore(app, config),
    schema,
    bucketMs: config.USAGE_BUCKET_S * 1000,
    retentionMs: config.USAGE_RETENTION_DAYS * 86_400_000,
    maxOperations: config.USAGE_MAX_OPERATIONS,
    onError: (error) => app.log.warn({ err: error }, 'field usage not flushed; kept for the next flush'),
  });
  const timer = setInterval(() => void usage.flush(), config.USAGE_FLUSH_S * 1000);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await usage.flush();
  });
  return usage;
}

/** Where counts are added up: the subgraphs' database, DATABASE_URL's, or this process's memory. */
async function usageStore(app: FastifyInstance, config: PlatformConfig): Promise<UsageStore> {
  const shared: Database | null = app.subgraphs.runtime?.db ?? null;
  if (!shared && !config.DATABASE_URL) return new MemoryUsageStore();
  const db = shared ?? (await openDatabase({ url: config.DATABASE_URL, schema: config.DATABASE_SCHEMA, queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT_MS }));
  if (!shared) app.addHook('onClose', () => db.close());
  await migrate(db, [USAGE_MIGRATIONS]);
  return new SqlUsageStore(db);
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Field usage per client and operation; null with USAGE_RECORDING=false. */
    usage: UsageRecorder | null;
  }
}
