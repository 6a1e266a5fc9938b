import { bondingConfig } from './bonding/config.js';
import { featuresConfig } from './features/config.js';
import { optimizationConfig } from './optimization/config.js';
import { predictionConfig } from './prediction/config.js';
import { rentalConfig } from './rental/config.js';

/**
 * Each subgraph's section of the configuration, by name (gateway/config.ts merges them with the others).
 * Apart from the registry: reading the configuration loads no subgraph code and no GraphQL library, so a
 * process can settle its mode (gateway/http/process.ts, `productionModeUnlessSet`) before those load.
 */
export const subgraphConfigs = {
  rental: rentalConfig,
  prediction: predictionConfig,
  bonding: bondingConfig,
  features: featuresConfig,
  optimization: optimizationConfig,
};
