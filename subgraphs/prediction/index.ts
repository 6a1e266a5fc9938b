import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { readSubgraphSdl } from '../../platform/subgraph.js';
import { loadModels } from './model.js';
import type { PredictionContext } from './context.js';
import { resolverMap } from './resolvers.js';
import { predictionRoutes } from './rest.js';

/**
 * The prediction subgraph: three trained models (dwell and travel quantile minutes, locker-diversion
 * probability) loaded from models/*.json at start. It keeps no state, so it has no migrations.
 */
export const prediction: SubgraphModule = {
  name: 'prediction',
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
    const schema = buildSubgraphSchema({ typeDefs: parse(readSubgraphSdl('prediction')), resolvers: resolverMap });
    const context: PredictionContext = { models };
    return {
      schema,
      context: () => context,
      ready: async () => true,
      close: async () => undefined,
    };
  },
};
