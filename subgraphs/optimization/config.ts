import { configSection, intFrom } from '../../platform/config.js';

/** The optimization subgraph's section of the configuration (docs/operations.md, generated from it). */
export const optimizationConfig = configSection('optimization', 'subgraphs/optimization/config.ts', {
  FLEET_SEED: intFrom('FLEET_SEED', 0, 2_147_483_647).default(7).describe('seed of the simulated AIS fleet'),
  FLEET_SIZE: intFrom('FLEET_SIZE', 4, 1000).default(24).describe('vessels in the simulated fleet (4..1000)'),
  FLEET_TICK_MS: intFrom('FLEET_TICK_MS', 50, 3_600_000).default(10_000).describe('how often the fleet simulation records positions'),
  OPTIMIZATION_MAX_QUBITS: intFrom('OPTIMIZATION_MAX_QUBITS', 4, 24)
    .default(24)
    .describe('most qubits one quantum run may simulate (2^24 amplitudes take 256 MiB)'),
  OPTIMIZATION_MAX_CONCURRENT_RUNS: intFrom('OPTIMIZATION_MAX_CONCURRENT_RUNS', 1, 64)
    .default(2)
    .describe('quantum runs in progress at once across instances; one more is 429'),
  OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT: intFrom('OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT', 1, 64)
    .default(1)
    .describe(
      'quantum runs one tenant may have in progress at once (operators are not capped by it), so no tenant holds every slot; one more is 429 naming the tenant',
    ),
  OPTIMIZATION_MAX_RUN_SECONDS: intFrom('OPTIMIZATION_MAX_RUN_SECONDS', 1, 3600)
    .default(120)
    .describe('a run estimated to take longer is refused before it starts'),
  OPTIMIZATION_RUN_LEASE_S: intFrom('OPTIMIZATION_RUN_LEASE_S', 2, 600)
    .default(15)
    .describe(
      "PostgreSQL: a running quantum run's lease, renewed by its process every third of it; an expired one (the process died) is failed by any instance's next sweep (embedded: the runs left running are failed at start)",
    ),
});
