import { z } from 'zod';
import { text } from '../../platform/validate.js';
import { DURATION_FORMAT, parseDuration } from './duration.js';
import { VIEW_DEFINITIONS } from './registry.js';

/** Input schemas of the features subgraph (GraphQL arguments; REST bodies map onto them). */

export const MAX_ENTITY_ROWS = 10_000;
export const MAX_VIEWS = 10;
export const MAX_LABEL_SET_ROWS = 100_000;

export const ID_PATTERNS = {
  policyId: { pattern: /^P-\d{6}$/, example: 'P-000123' },
  claimId: { pattern: /^C-\d{6}$/, example: 'C-000123' },
  machineId: { pattern: /^EQ-\d{3}$/, example: 'EQ-001' },
} as const;

const entityId = (key: keyof typeof ID_PATTERNS) => text().regex(ID_PATTERNS[key].pattern, `must look like ${ID_PATTERNS[key].example}`);

const instant = z.date();

const viewName = text().refine((name) => VIEW_DEFINITIONS.some((v) => v.name === name), {
  message: `is not a feature view (known: ${VIEW_DEFINITIONS.map((v) => v.name).join(', ')})`,
});

const viewList = z
  .array(viewName)
  .min(1, 'must name at least one view')
  .max(MAX_VIEWS, `must name at most ${MAX_VIEWS} views`)
  .refine((views) => new Set(views).size === views.length, 'must not name a view twice');

/** `NONE` or an ISO 8601 duration, as milliseconds (null: no TTL). */
const ttlText = text().transform((value, ctx) => {
  if (value === 'NONE' || value === 'none') return null;
  const ms = parseDuration(value);
  if (ms === null) {
    ctx.addIssue({ code: 'custom', message: `${DURATION_FORMAT}, or NONE` });
    return z.NEVER;
  }
  return ms;
});

const entityRowInput = z
  .object({
    policyId: entityId('policyId').nullish(),
    claimId: entityId('claimId').nullish(),
    machineId: entityId('machineId').nullish(),
    eventTimestamp: instant,
    label: z.number().finite().nullish(),
  })
  .refine((r) => r.policyId != null || r.claimId != null || r.machineId != null, {
    message: 'needs at least one entity key (policyId, claimId or machineId)',
  });

const modelName = z.enum(['UNDERWRITING', 'PRICING', 'FRAUD']);
const engineName = z.enum(['DUCKDB', 'TYPESCRIPT', 'BOTH']);
const availabilityName = z.enum(['AS_KNOWN', 'EVENT_TIME']);

export const pitTrainingInput = z
  .object({
    entities: z.array(entityRowInput).min(1, 'must hold at least one row').max(MAX_ENTITY_ROWS, `must hold at most ${MAX_ENTITY_ROWS} rows`).nullish(),
    labelSet: modelName.nullish(),
    views: viewList.nullish(),
    ttl: ttlText.nullish(),
    engine: engineName.nullish(),
    availability: availabilityName.nullish(),
    from: instant.nullish(),
    to: instant.nullish(),
    limit: z.number().int().min(1).max(MAX_LABEL_SET_ROWS).nullish(),
  })
  .superRefine((input, ctx) => {
    const given = (input.entities ? 1 : 0) + (input.labelSet ? 1 : 0);
    if (given !== 1) ctx.addIssue({ code: 'custom', path: ['entities'], message: 'give either entities or labelSet (exactly one)' });
    if (input.entities && (input.from || input.to || input.limit)) {
      ctx.addIssue({ code: 'custom', path: [input.from ? 'from' : input.to ? 'to' : 'limit'], message: 'applies to a labelSet only' });
    }
    if (input.from && input.to && input.from >= input.to) ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be after from' });
  });

export const materializeInput = z.object({
  asOf: instant.nullish(),
  views: viewList.nullish(),
  engine: engineName.nullish(),
});

export const leakageAuditInput = z.object({
  labelSet: modelName,
  views: viewList.nullish(),
  testFrom: instant.nullish(),
});

const ID_ARGS = {
  policyId: z.object({ id: entityId('policyId') }),
  claimId: z.object({ id: entityId('claimId') }),
  machineId: z.object({ id: entityId('machineId') }),
};
/** The `{ id }` argument of an entity (schemas built once: zod compiles each on its first parse). */
export const idArg = (key: keyof typeof ID_PATTERNS) => ID_ARGS[key];
export const asOfArg = z.object({ asOf: instant.nullish() });
export const firstArg = z.object({ first: z.number().int().min(1).max(100).nullish() });
export const viewNameArg = z.object({ name: text() });
