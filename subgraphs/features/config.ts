import { z } from 'zod';
import { configSection, intFrom } from '../../platform/config.js';

/** The features subgraph's section of the configuration (docs/operations.md, generated from it). */
export const featuresConfig = configSection('features', 'subgraphs/features/config.ts', {
  FEATURES_SEED: intFrom('FEATURES_SEED', 0, 2 ** 31 - 1)
    .default(20_261_123)
    .describe('seed of the generated insurance world'),
  FEATURES_POLICIES: intFrom('FEATURES_POLICIES', 20, 200_000).default(3000).describe('policies in the generated world (20..200,000)'),
  FEATURES_DATA_DIR: z
    .string()
    .trim()
    .min(1)
    .default('./features-data')
    .describe(
      'the features offline store: the generated world as Parquet files, written on first use and read on later starts; `:memory:` keeps it in memory only',
    ),
  REDIS_URL: z
    .string()
    .trim()
    .regex(/^rediss?:\/\/\S+$/, 'REDIS_URL must be a redis:// or rediss:// URL')
    .optional()
    .describe('`redis://...`: the features online store in Redis instead of the database (served from an in-memory copy reloaded on every materialization)'),
  FEATURES_REDIS_TIMEOUT_MS: intFrom('FEATURES_REDIS_TIMEOUT_MS', 20, 60_000)
    .default(1000)
    .describe(
      'how long an online lookup (or the health check) waits for Redis before it answers 503 (20..60,000): a Redis that keeps its connections but does not answer',
    ),
  FEATURES_REDIS_PREFIX: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_:.-]{1,64}$/, 'FEATURES_REDIS_PREFIX must be 1-64 characters of A-Z a-z 0-9 _ : . -')
    .default('features')
    .describe('key prefix in Redis'),
});
