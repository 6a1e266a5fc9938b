import { fileURLToPath } from 'node:url';
import { defineSubgraph } from '../../platform/subgraph.js';
import { OfflineStore } from './offline.js';
import { databaseOnlineStore, redisOnlineStore } from './online-store.js';
import type { FeaturesContext } from './context.js';
import { featuresResolvers } from './resolvers.js';
import { featuresConfig } from './config.js';
import { featuresRoutes } from './rest.js';
import { FeatureService } from './service.js';
import { STATE_TYPES } from './records.js';
import { FeaturesStore } from './store.js';

/**
 * The features subgraph: point-in-time feature serving for insurance models. The offline store is a
 * generated world (FEATURES_SEED, FEATURES_POLICIES) built on first use; the online store is the database,
 * or Redis with REDIS_URL; materializations are recorded in the database.
 */
export const features = defineSubgraph({
  name: 'features',
  config: featuresConfig,
  resolvers: featuresResolvers,
  shared: ['Policy', 'Claim', 'Machine'],
  // What its reads depend on (platform/state-trace.ts; docs/features.md, State the gateways cache): the
  // materializations and the online rows, the same for every caller.
  state: {
    features_materializations: { type: STATE_TYPES.materialization, grain: 'everyone' },
    features_online: { type: STATE_TYPES.online, grain: 'everyone' },
  },
  restPrefix: '/features',
  routes: featuresRoutes,
  migrations: [{ owner: 'features', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  async start({ db, config, clock, events }) {
    const store = new FeaturesStore(db);
    const redis = config.REDIS_URL
      ? await redisOnlineStore(config.REDIS_URL, config.FEATURES_REDIS_PREFIX, store, events, config.FEATURES_REDIS_TIMEOUT_MS)
      : null;
    const online = redis ?? databaseOnlineStore(store, events);
    const options = { seed: config.FEATURES_SEED, policies: config.FEATURES_POLICIES };
    const dir = config.FEATURES_DATA_DIR === ':memory:' ? null : config.FEATURES_DATA_DIR;
    const service = new FeatureService(() => OfflineStore.open({ ...options, dir }), online, store, clock, options);
    // Redis that lost its values is refilled by re-running the materialization the database records last.
    redis?.setRebuild((last) =>
      service.materialize({ asOf: last.asOf.getTime(), views: last.views.map((v) => v.view), engine: last.engine === 'TYPESCRIPT' ? 'TYPESCRIPT' : 'DUCKDB' }),
    );
    return {
      context: (): FeaturesContext => ({ service, now: clock.now() }),
      async ready() {
        try {
          await store.ping();
          await online.ping();
          return true;
        } catch {
          return false;
        }
      },
      close: () => service.close(),
    };
  },
});
