import { ConfigError, isDemoMode, isLoopbackHost, parseConfig, platformConfig, type ConfigValues } from '../platform/config.js';
import { subgraphConfigs } from '../subgraphs/config.js';
import { agentsConfig } from './agents/config.js';
import { dashboardConfig } from './dashboard/config.js';
import { sourcesConfig } from './sources/config.js';
import { governanceConfig } from './governance/config.js';
import { graphqlConfig } from './graphql/config.js';
import { httpConfig } from './http/config.js';
import { securityConfig } from './security/config.js';
import { subscriptionsConfig } from './subscriptions/config.js';

/*
 * The whole configuration: platform's section, each gateway room's (gateway/<room>/config.ts) and each
 * subgraph's (subgraphs/<name>/config.ts), merged into one validated object (`loadConfig`). Every variable
 * is declared, with its default and documentation, beside the code that reads it; docs/operations.md's
 * table is generated from these declarations.
 */

/** Every section, in the order the configuration table lists them. */
export const CONFIG_SECTIONS = [
  platformConfig,
  httpConfig,
  securityConfig,
  sourcesConfig,
  graphqlConfig,
  subscriptionsConfig,
  governanceConfig,
  agentsConfig,
  dashboardConfig,
  subgraphConfigs.rental,
  subgraphConfigs.prediction,
  subgraphConfigs.bonding,
  subgraphConfigs.features,
  subgraphConfigs.optimization,
];

const shape = {
  ...platformConfig.shape,
  ...httpConfig.shape,
  ...securityConfig.shape,
  ...sourcesConfig.shape,
  ...graphqlConfig.shape,
  ...subscriptionsConfig.shape,
  ...governanceConfig.shape,
  ...agentsConfig.shape,
  ...dashboardConfig.shape,
  ...subgraphConfigs.rental.shape,
  ...subgraphConfigs.prediction.shape,
  ...subgraphConfigs.bonding.shape,
  ...subgraphConfigs.features.shape,
  ...subgraphConfigs.optimization.shape,
};

/** The whole configuration, as the gateway and subgraph processes read it. */
export type Config = ConfigValues<typeof shape>;

/** Parses the environment; a bad value throws a ConfigError naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const config = parseConfig(CONFIG_SECTIONS, shape, env);
  // Demo mode is chosen, not fallen into: beyond loopback, empty credential variables are a mistake unless
  // the setting says otherwise.
  if (isDemoMode(config) && !isLoopbackHost(config.HOST) && !config.DEMO_MODE_BEYOND_LOOPBACK) {
    throw new ConfigError([
      `HOST: ${config.HOST} is not loopback and no credential is configured, so every caller would act as the demo principal (every scope, ops:admin included). Set API_KEYS, API_KEYS_FILE or AUTH_JWKS_URL; or HOST=127.0.0.1; or DEMO_MODE_BEYOND_LOOPBACK=true to serve demo mode to the network on purpose`,
    ]);
  }
  return config;
}

/** The environment's config, or exit 2 with the message naming each bad variable. */
export function configOrExit(env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(2);
    }
    throw error;
  }
}
