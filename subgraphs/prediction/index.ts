import { defineSubgraph } from '../../platform/subgraph.js';
import { loadModels } from './model.js';
import type { PredictionContext } from './context.js';
import { predictionResolvers } from './resolvers.js';
import { predictionConfig } from './config.js';
import { predictionRoutes } from './rest.js';

/**
 * The prediction subgraph: three trained models (dwell and travel quantile minutes, locker-diversion
 * probability) loaded from models/*.json at start. It keeps no state, so it has no migrations.
 */
export const prediction = defineSubgraph({
  name: 'prediction',
  config: predictionConfig,
  resolvers: predictionResolvers,
  // Booking here is rental's (a reference); its owner is checked where it is stored.
  shared: [],
  restPrefix: '/prediction',
  routes: predictionRoutes,
  migrations: [],
  // Every answer is a function of its inputs and the models loaded at start (a Booking's forecast, of the
  // representation's distance and departure time).
  pure: { query: 'all', entities: ['Booking'] },
  async start() {
    // A missing or malformed artifact stops the start with a message naming the file.
    const models = loadModels();
    const context: PredictionContext = { models };
    return {
      context: () => context,
      ready: async () => true,
      close: async () => undefined,
    };
  },
});
