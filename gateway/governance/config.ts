import { boolFrom, configSection, intFrom, type ConfigValues } from '../../platform/config.js';

/** The gateway's governance room's section of the configuration: field usage per client (docs/operations.md, generated from it). */
export const governanceConfig = configSection('gateway/governance', 'gateway/governance/config.ts', {
  USAGE_RECORDING: boolFrom('USAGE_RECORDING', 'true').describe(
    'count which client used which schema coordinate, per operation ([Changing the schema](operations.md#changing-the-schema)); `false` counts nothing',
  ),
  USAGE_BUCKET_S: intFrom('USAGE_BUCKET_S', 60, 86_400).default(3600).describe('the time bucket usage is counted in, seconds'),
  USAGE_FLUSH_S: intFrom('USAGE_FLUSH_S', 1, 3600).default(30).describe('seconds between flushes of the counts in memory to the database'),
  USAGE_RETENTION_DAYS: intFrom('USAGE_RETENTION_DAYS', 1, 3650).default(30).describe('days of usage kept; older buckets are deleted at each flush'),
  USAGE_MAX_OPERATIONS: intFrom('USAGE_MAX_OPERATIONS', 10, 1_000_000)
    .default(10_000)
    .describe(
      "distinct client-operation pairs counted in memory between flushes; past it, a client's other operations count as `(other)` (memory stays bounded)",
    ),
});

export type GovernanceConfig = ConfigValues<typeof governanceConfig.shape>;
