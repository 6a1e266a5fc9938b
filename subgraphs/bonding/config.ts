import { configSection, intFrom } from '../../platform/config.js';

/** The bonding subgraph's section of the configuration (docs/operations.md, generated from it). */
export const bondingConfig = configSection('bonding', 'subgraphs/bonding/config.ts', {
  BONDING_TICK_MS: intFrom('BONDING_TICK_MS', 20, 600_000).default(1000).describe("wall-clock interval of a bonding session's link-model step (20..600,000)"),
  BONDING_SIM_SECONDS_PER_TICK: intFrom('BONDING_SIM_SECONDS_PER_TICK', 1, 86_400)
    .default(60)
    .describe('simulated seconds one link-model step advances (1..86,400)'),
  BONDING_SESSION_TTL_SECONDS: intFrom('BONDING_SESSION_TTL_SECONDS', 10, 30 * 86_400)
    .default(3600)
    .describe('a bonding session without a start or key generation for this long is closed (10..2,592,000)'),
  BONDING_MAX_OPEN_SESSIONS_PER_USER: intFrom('BONDING_MAX_OPEN_SESSIONS_PER_USER', 1, 10_000)
    .default(16)
    .describe('open bonding sessions one user may hold; one more is 409 (1..10,000)'),
});
