import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createdId, defineSubgraph } from '../../platform/subgraph.js';
import { createLoaders, type OptimizationContext } from './context.js';
import { optimizationResolvers } from './resolvers.js';
import { optimizationConfig } from './config.js';
import { optimizationRoutes } from './rest.js';
import { STATE_TYPES, TOPICS } from './records.js';
import { OptimizationService } from './service.js';
import { OptimizationStore } from './store.js';
import { periodic } from '../../platform/periodic.js';

/**
 * The optimization subgraph: a simulated AIS fleet, hybrid QAOA runs on an exact state-vector simulator
 * (in worker threads) with classical refinement, and Z3 proofs of the fleet's safety constraints.
 */
export const optimization = defineSubgraph({
  name: 'optimization',
  config: optimizationConfig,
  resolvers: optimizationResolvers,
  shared: ['Vessel'],
  // Every fleet tick carries every vessel's position: an hour of them is kept (the tracks live in their own
  // table); runs' ends are kept whole.
  retention: [{ topic: TOPICS.positions, maxAgeS: 3600 }],
  // What its reads depend on (platform/state-trace.ts; docs/optimization.md, State the gateways cache): the
  // fleet's clock and vessels are everyone's, a run its tenant's.
  state: {
    optimization_fleet: { type: STATE_TYPES.fleet, grain: 'everyone' },
    optimization_vessels: { type: STATE_TYPES.vessel, grain: 'everyone' },
    optimization_positions: { type: STATE_TYPES.vessel, grain: 'everyone' },
    optimization_runs: { type: STATE_TYPES.run, grain: 'tenant' },
  },
  owned: [
    {
      type: 'QuantumRun',
      table: 'optimization_runs',
      owner: { tenant: 'tenant', principal: 'principal' },
      grain: 'tenant',
      idArguments: ['runId'],
      unknownId: '00000000-0000-4000-8000-000000000000',
      make: async (run) =>
        createdId(
          await run('mutation { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4, maxEvaluations: 5, shots: 64 }) { id } }'),
          'startQuantumRun',
        ),
    },
  ],
  restPrefix: '/optimization',
  routes: optimizationRoutes,
  migrations: [{ owner: 'optimization', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  async start({ db, config, clock, events }) {
    const store = await OptimizationStore.open(
      db,
      {
        seed: config.FLEET_SEED,
        size: config.FLEET_SIZE,
        tickMs: config.FLEET_TICK_MS,
        leaseMs: config.OPTIMIZATION_RUN_LEASE_S * 1000,
        owner: `${hostname()}:${process.pid}:${randomUUID()}`,
        onEvents: () => void events.wake(),
      },
      clock.now(),
    );
    const ready = async () => {
      try {
        await db.query('SELECT 1 FROM optimization_fleet LIMIT 1');
        return true;
      } catch {
        return false;
      }
    };
    const service = new OptimizationService(store, clock, {
      limits: {
        maxQubits: config.OPTIMIZATION_MAX_QUBITS,
        maxConcurrentRuns: config.OPTIMIZATION_MAX_CONCURRENT_RUNS,
        maxConcurrentRunsPerTenant: config.OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT,
        maxEstimatedSeconds: config.OPTIMIZATION_MAX_RUN_SECONDS,
      },
      tickIntervalMs: config.FLEET_TICK_MS,
      databaseAnswers: ready,
    });
    const ticker = periodic(() => store.tick(clock.now()), config.FLEET_TICK_MS);
    // PostgreSQL, runs shared: this process's runs keep their lease, and any instance fails a run whose
    // process died (its lease expired). Embedded there is one writer, which failed its predecessors' runs at
    // start: no lease to renew (and no write every few seconds to drop the read cache).
    const leases = db.kind === 'postgres' ? periodic(() => store.renewAndSweep(), Math.round((config.OPTIMIZATION_RUN_LEASE_S * 1000) / 3)) : null;

    return {
      context({ principal }): OptimizationContext {
        return { service, events, clock, principal, loaders: createLoaders(service, principal) };
      },
      ready,
      warmUp: () => store.warmProfiles(clock.now()),
      async close() {
        await ticker.stop();
        await service.close();
        await leases?.stop();
      },
    };
  },
});
