import type { FeatureService } from './service.js';

/*
 * What a features resolver receives: the request's context, and the reference the entity types
 * (Policy, Claim, Machine) are resolved from (their parents in schema-types.ts, generated from the SDL).
 */

export interface FeaturesContext {
  service: FeatureService;
  now: Date;
}

/** An entity as this subgraph receives it: its key. */
export interface EntityRef {
  id: string;
}
