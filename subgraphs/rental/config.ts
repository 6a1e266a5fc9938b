import { z } from 'zod';
import { configSection, intFrom } from '../../platform/config.js';

/** The rental subgraph's section of the configuration (docs/operations.md, generated from it). */
export const rentalConfig = configSection('rental', 'subgraphs/rental/config.ts', {
  QUOTE_TTL_SECONDS: intFrom('QUOTE_TTL_SECONDS', 5, 3600).default(120).describe('lifetime of a quote and its reservations (5..3600)'),
  QUOTE_SWEEP_INTERVAL_MS: intFrom('QUOTE_SWEEP_INTERVAL_MS', 50, 600_000).default(1000).describe('how often expired quotes are released'),
  TRACKING_TICK_MS: intFrom('TRACKING_TICK_MS', 50, 600_000)
    .default(2000)
    .describe('how often a delivery in transit publishes its position (`trackingUpdated`)'),
  QUOTE_SIGNING_KEY: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe('Ed25519 private JWK to sign quotes with; unset: one is generated once and kept in the database'),
});
