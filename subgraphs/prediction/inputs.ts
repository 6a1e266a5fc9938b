import { z } from 'zod';
import { graphqlFeatureSchema, restFeatureSchema } from './features.js';

/** Inputs of the prediction subgraph: GraphQL has checked the types; these are the ranges and codes. */

/** Most inputs one batch call may carry. */
const MAX_BATCH = 1000;

/** A batch's length is checked before any item is: an oversized batch costs nothing to refuse. */
const batchOf = <T extends z.ZodType>(item: T) =>
  z.array(z.unknown()).min(1, 'must not be empty').max(MAX_BATCH, `at most ${MAX_BATCH} inputs per call`).pipe(z.array(item));

export const dwellInput = graphqlFeatureSchema('dwell');
export const travelInput = graphqlFeatureSchema('travel');
export const lockerInput = graphqlFeatureSchema('locker');
export const dwellBatch = batchOf(dwellInput);
export const travelBatch = batchOf(travelInput);
export const lockerBatch = batchOf(lockerInput);

export const ischaemicRemaining = z.number().finite().min(0, 'must be at least 0').max(2880, 'must be at most 2880');

/** REST bodies: the features by their snake_case names, as the specification's clients send them. */
export const dwellBody = restFeatureSchema('dwell');
export const travelBody = restFeatureSchema('travel');
export const lockerBody = restFeatureSchema('locker');

const batchBody = <T extends z.ZodType>(item: T) => z.object({ instances: batchOf(item) });
export const dwellBatchBody = batchBody(dwellBody);
export const travelBatchBody = batchBody(travelBody);
export const lockerBatchBody = batchBody(lockerBody);

export const coldChainBody = z.object({
  dwell: dwellBody,
  travel: travelBody,
  ischaemic_remaining_min: ischaemicRemaining,
});
