import { fileURLToPath } from 'node:url';
import { createdId, defineSubgraph } from '../../platform/subgraph.js';
import { createLoaders, type BondingContext } from './context.js';
import { bondingResolvers } from './resolvers.js';
import { bondingConfig } from './config.js';
import { bondingRoutes } from './rest.js';
import { BondingService } from './service.js';
import { STATE_TYPES, TOPICS } from './records.js';
import { BondingStore } from './store.js';
import { periodic } from '../../platform/periodic.js';

/**
 * The bonding subgraph: multipath sessions whose paths move under a seeded link model, correlated-outage
 * pair recommendation, and BB84 (simulated) + ML-KEM hybrid keys.
 */
export const bonding = defineSubgraph({
  name: 'bonding',
  config: bondingConfig,
  readiness: 'bonding_sessions',
  resolvers: bondingResolvers,
  // An open session writes a metrics event a tick (about 60 a minute): after an hour only the newest per
  // session is kept; its starts, state changes, keys and close are kept whole.
  retention: [{ topic: TOPICS.session, compact: { afterS: 3600, where: `o.payload->>'kind' = 'metrics'` } }],
  owned: [
    {
      type: 'BondingSession',
      table: 'bonding_sessions',
      owner: { tenant: 'tenant', principal: 'user_id' },
      grain: 'principal',
      idArguments: ['sessionId'],
      unknownId: 'BS-000000000000',
      inputs: { bits: 128, seed: 1 },
      make: async (run) => createdId(await run('mutation { startBondingSession(seed: 7) { id } }'), 'startBondingSession'),
    },
  ],
  // What its reads depend on (platform/state-trace.ts; docs/bonding.md, State the gateways cache): a session
  // and its key generations are their user's alone.
  state: {
    bonding_sessions: { type: STATE_TYPES.session, grain: 'principal' },
    bonding_keys: { type: STATE_TYPES.key, grain: 'principal' },
  },
  restPrefix: '/bonding',
  routes: bondingRoutes,
  migrations: [{ owner: 'bonding', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  // A recommendation is a function of the paths, constraints and risk groups given (no session state);
  // its elapsedMs is a measurement of one computation, so a document selecting it is fetched every time.
  pure: { query: ['recommendPaths'], entities: [], except: ['elapsedMs'] },
  async start({ db, config, clock, events, demoMode }) {
    const store = new BondingStore(db, {
      tickMs: config.BONDING_TICK_MS,
      simSecondsPerTick: config.BONDING_SIM_SECONDS_PER_TICK,
      sessionTtlSeconds: config.BONDING_SESSION_TTL_SECONDS,
      maxOpenSessionsPerUser: config.BONDING_MAX_OPEN_SESSIONS_PER_USER,
      onEvents: () => void events.wake(),
    });
    // Every instance runs the link model; leases and conditional steps make each step happen once.
    const linkModel = periodic(() => store.runLinkModel(clock.now()), config.BONDING_TICK_MS);
    const service = new BondingService(store, demoMode);
    return {
      context(request): BondingContext {
        const { principal } = request;
        return { service, events, clock, now: clock.now(), principal, loaders: createLoaders(service, principal) };
      },
      async close() {
        await linkModel.stop();
      },
    };
  },
});
