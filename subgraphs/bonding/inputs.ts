import { z } from 'zod';
import { text } from '../../platform/validate.js';
import { PATH_KINDS, type PathKind } from './link-model.js';

/*
 * Input rules of the bonding subgraph, shared by the GraphQL resolvers and the REST route table so both
 * meet the same checks and messages.
 */

/** The user a session belongs to when the caller names none (the specification's sandbox user). */
export const SANDBOX_USER = 'sandbox';

const USER_ID_RULE = 'must be 1 to 64 characters from A-Z, a-z, 0-9, underscore, dot and hyphen';
export const userId = text().regex(/^[A-Za-z0-9_.-]{1,64}$/, USER_ID_RULE);

export const sessionId = text()
  .regex(/^BS-[0-9a-fA-F]{12}$/, 'must be a bonding session id (BS- and 12 hex digits)')
  .transform((s) => `BS-${s.slice(3).toLowerCase()}`);

const num = (min: number, max: number) => z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
export const int = (min: number, max: number) => num(min, max).int('must be a whole number');

export const seed = int(0, 2_147_483_647);
export const MAX_PATHS = 1000;
const MAX_SESSION_PATHS = 16;

const pathId = text().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1 to 64 characters from A-Z, a-z, 0-9, _ . : -');
const riskGroup = text().regex(
  /^[a-z][a-z0-9-]{0,31}(:[A-Za-z0-9_.-]{1,64})?$/,
  'must be a group kind, optionally with a name (conduit:street-a, cell-site:mast-12, weather)',
);

/** GraphQL enum value <-> link-model kind ("FIVE_G" is "5g"). */
const kindFromEnum = (value: string): PathKind => (value === 'FIVE_G' ? '5g' : (value.toLowerCase() as PathKind));
/** A path kind as its GraphQL enum value (`FIVE_G` for 5g). */
export const kindToEnum = (kind: PathKind): Uppercase<Exclude<PathKind, '5g'>> | 'FIVE_G' =>
  kind === '5g' ? 'FIVE_G' : (kind.toUpperCase() as Uppercase<Exclude<PathKind, '5g'>>);
const KIND_ENUM_VALUES = PATH_KINDS.map(kindToEnum) as [string, ...string[]];
const kindEnum = z.enum(KIND_ENUM_VALUES, { message: `must be one of ${KIND_ENUM_VALUES.join(', ')}` }).transform(kindFromEnum);
/** REST spells kinds in lower case, 5G as "5g". */
export const restKind = z.enum(PATH_KINDS, { message: `must be one of ${PATH_KINDS.join(', ')}` });

/** Ids must be unique within a list: the second use is named. */
function uniqueIds<T extends { id: string }>(list: T[], ctx: z.core.$RefinementCtx<T[]>) {
  const seen = new Map<string, number>();
  list.forEach((p, i) => {
    const first = seen.get(p.id);
    if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicates the id of item ${first}` });
    else seen.set(p.id, i);
  });
}

const pathSpecs = z
  .array(z.object({ id: pathId, kind: kindEnum, sharedRisk: z.array(riskGroup).max(8, 'must have at most 8 items').nullish() }))
  .min(1, 'must have at least 1 item')
  .max(MAX_SESSION_PATHS, `must have at most ${MAX_SESSION_PATHS} items`)
  .superRefine(uniqueIds);

export const startArgs = z.object({
  userId: userId.nullish(),
  seed: seed.nullish(),
  paths: pathSpecs.nullish(),
});

/** One candidate path of a recommendation request (field names as given; REST maps its names onto these). */
const candidate = z
  .object({
    id: pathId,
    kind: kindEnum.nullish(),
    latencyMs: num(0, 60_000),
    jitterMs: num(0, 60_000).nullish(),
    lossPct: num(0, 100),
    capacityMbps: num(0, 10_000_000).refine((v) => v > 0, 'must be greater than 0'),
    up: z.boolean().nullish(),
    outageProbability: num(0, 1).nullish(),
    sharedRisk: z.array(riskGroup).max(16, 'must have at most 16 items').nullish(),
  })
  .superRefine((p, ctx) => {
    if (!p.kind && (p.outageProbability === null || p.outageProbability === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['outageProbability'], message: 'is required when kind is not given' });
    }
  });

export const constraints = z.object({
  maxLatencyMs: num(0, 60_000).nullish(),
  maxJitterMs: num(0, 60_000).nullish(),
  maxLossPct: num(0, 100).nullish(),
  minCombinedCapacityMbps: num(0, 20_000_000).nullish(),
});

export const recommendArgs = z.object({
  paths: z.array(candidate).max(MAX_PATHS, `must have at most ${MAX_PATHS} items`).superRefine(uniqueIds),
  constraints: constraints.nullish(),
  riskGroups: z
    .array(z.object({ id: riskGroup, outageProbability: num(0, 1) }))
    .max(MAX_PATHS, `must have at most ${MAX_PATHS} items`)
    .superRefine(uniqueIds)
    .nullish(),
});

const MIN_KEY_BITS = 64;
const MAX_KEY_BITS = 4096;

export const quantumKeyInput = z.object({
  sessionId,
  bits: int(MIN_KEY_BITS, MAX_KEY_BITS),
  noise: num(0, 0.5).nullish(),
  interceptFraction: num(0, 1).nullish(),
  seed: seed.nullish(),
});

export const sessionsArgs = z.object({ userId: userId.nullish(), first: int(1, 100) });
