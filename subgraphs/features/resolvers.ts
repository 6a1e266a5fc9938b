import { DateTimeScalar } from '../../platform/scalars.js';
import { currentTrace, validUntil } from '../../platform/state-trace.js';
import { invalidInput, parseInput } from '../../platform/validate.js';
import { columnName, DEFAULT_AVAILABILITY, type EntityType } from './frame.js';
import { asOfArg, firstArg, idArg, leakageAuditInput, materializeInput, pitTrainingInput, viewNameArg } from './inputs.js';
import type { EntityRow, Frame } from './offline.js';
import type { MaterializationRecord } from './records.js';
import { VIEW_DEFINITIONS, viewDefinition, viewVersion, type ViewDefinition } from './registry.js';
import type { FeatureService, OnlineFeatures } from './service.js';
import type { FeaturesContext } from './context.js';
import type { Resolvers } from './schema-types.js';

const lower = <T extends string>(s: T) => s.toLowerCase() as Lowercase<T>;
/** An internal lower-case value as its GraphQL enum value. */
const upper = <T extends string>(s: T) => s.toUpperCase() as Uppercase<T>;

/** Entity ids the offline store does not know: 400 naming each row and key. */
async function checkEntities(service: FeatureService, rows: readonly EntityRow[], root: string): Promise<void> {
  const unknown = await service.unknownEntities(rows);
  if (unknown.length > 0) {
    throw invalidInput(
      unknown.slice(0, 20).map((u) => ({ field: `${root}.${u.index}.${u.key}`, message: `unknown ${u.key === 'policyId' ? 'policy' : 'claim'} ${u.id}` })),
    );
  }
}

/** A view whose entity key no row carries would only add null columns: refused, naming the view. */
function checkViewKeys(rows: readonly EntityRow[], views: readonly string[]): void {
  const key = { policy: 'policyId', claim: 'claimId', machine: 'machineId' } as const;
  const problems = views.flatMap((name, i) => {
    const entity = viewDefinition(name)!.entity;
    const has = rows.some((r) => r[key[entity]] !== null);
    return has ? [] : [{ field: `views.${i}`, message: `${name} is keyed by ${entity}: the entity rows carry no ${key[entity]}` }];
  });
  if (problems.length > 0) throw invalidInput(problems);
}

interface FrameRowView {
  policyId: string | null;
  claimId: string | null;
  machineId: string | null;
  eventTimestamp: Date;
  label: number | null;
  values: (number | null)[];
}

function frameRows(frame: Frame): FrameRowView[] {
  return frame.rows.map((r, i) => ({
    policyId: r.policyId,
    claimId: r.claimId,
    machineId: r.machineId,
    eventTimestamp: new Date(r.eventTs),
    label: r.label,
    values: frame.values.map((col) => (Number.isNaN(col[i]!) ? null : col[i]!)),
  }));
}

const viewOf = (rowCounts: ReadonlyMap<string, number>) => (v: ViewDefinition) => ({
  name: v.name,
  entity: upper(v.entity),
  description: v.description,
  source: v.source,
  ttl: v.ttl,
  postOutcome: v.postOutcome,
  version: viewVersion(v),
  rowCount: rowCounts.get(v.name) ?? 0,
  features: v.features.map((f) => ({ ...f, column: columnName(v.name, f.name) })),
});

const materializationOf = (m: MaterializationRecord) => ({
  ...m,
  views: m.views.map((v) => ({ ...v, watermark: v.watermark === null ? null : new Date(v.watermark) })),
});

const onlineOf = (o: OnlineFeatures | null) =>
  o ? { ...o, entity: upper(o.entity), views: o.views.map((v) => ({ ...v, featureTimestamp: v.featureTs })) } : null;

async function online(ctx: FeaturesContext, entity: EntityType, id: string) {
  return onlineOf(await ctx.service.onlineFeatures(entity, id));
}

/**
 * An entity's point-in-time features as of `asOf`, or of the request's now: that answer then holds until
 * one of the entity's rows becomes available or leaves its TTL.
 */
async function pointFeatures(ctx: FeaturesContext, entity: EntityType, id: string, asOf: Date | null | undefined) {
  const { values, changesAt } = await ctx.service.pointFeatures(entity, id, (asOf ?? ctx.now).getTime());
  if (!asOf) validUntil(changesAt);
  return values;
}

export const featuresResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Query: {
    featureViews: async (_, __, ctx) => VIEW_DEFINITIONS.map(viewOf(await ctx.service.viewRowCounts(VIEW_DEFINITIONS.map((v) => v.name)))),
    featureView: async (_, args, ctx) => {
      const { name } = parseInput(viewNameArg, args);
      const def = viewDefinition(name);
      return def ? viewOf(await ctx.service.viewRowCounts([name]))(def) : null;
    },
    pitTraining: async (_, args, ctx) => {
      const input = parseInput(pitTrainingInput, args.input);
      const rows: EntityRow[] = input.entities
        ? input.entities.map((e) => ({
            policyId: e.policyId ?? null,
            claimId: e.claimId ?? null,
            machineId: e.machineId ?? null,
            eventTs: e.eventTimestamp.getTime(),
            label: e.label ?? null,
          }))
        : await ctx.service.labelSet(lower(input.labelSet!), input.from?.getTime() ?? null, input.to?.getTime() ?? null, input.limit ?? null);
      if (input.entities) await checkEntities(ctx.service, rows, 'entities');
      if (input.views) checkViewKeys(rows, input.views);
      // Omitted and null both leave each view its own TTL; NONE (parsed to null) turns TTLs off.
      const ttlGiven = (args.input as { ttl?: unknown } | null)?.ttl != null;
      const frame = await ctx.service.pitTraining({
        rows,
        views: input.views ?? null,
        ttlMs: ttlGiven ? input.ttl : undefined,
        engine: input.engine ?? 'DUCKDB',
        availability: input.availability ?? DEFAULT_AVAILABILITY,
      });
      return { ...frame, rowCount: frame.rows.length, rows: frameRows(frame) };
    },
    onlinePolicyFeatures: (_, args, ctx) => online(ctx, 'policy', parseInput(idArg('policyId'), args).id),
    onlineClaimFeatures: (_, args, ctx) => online(ctx, 'claim', parseInput(idArg('claimId'), args).id),
    policy: async (_, args, ctx) => {
      const { id } = parseInput(idArg('policyId'), args);
      return (await ctx.service.knows('policy', id)) ? { id } : null;
    },
    claim: async (_, args, ctx) => {
      const { id } = parseInput(idArg('claimId'), args);
      return (await ctx.service.knows('claim', id)) ? { id } : null;
    },
    leakageAudit: async (_, args, ctx) => {
      const input = parseInput(leakageAuditInput, args.input);
      return ctx.service.audit(lower(input.labelSet), input.views ?? null, input.testFrom?.getTime() ?? null);
    },
    featureImportance: (_, __, ctx) => ctx.service.importance(),
    materializations: async (_, args, ctx) => {
      const { first } = parseInput(firstArg, args);
      return (await ctx.service.materializations(first ?? 20)).map(materializationOf);
    },
    featureStoreHealth: async (_, __, ctx) => {
      const health = await ctx.service.health();
      const claims = await ctx.service.claimCount();
      return {
        ...health,
        uptimeSeconds: Math.round((Date.now() - ctx.service.startedAt) / 100) / 10,
        seed: ctx.service.options.seed,
        policies: ctx.service.options.policies,
        claims,
        onlineStore: ctx.service.onlineStoreKind,
      };
    },
  },
  Mutation: {
    materialize: async (_, args, ctx) => {
      const input = parseInput(materializeInput, args.input);
      return materializationOf(
        await ctx.service.materialize({ asOf: input.asOf?.getTime() ?? null, views: input.views ?? null, engine: input.engine ?? 'DUCKDB' }),
      );
    },
  },
  Policy: {
    __resolveReference: (ref) => ref,
    features: (p, args, ctx) => pointFeatures(ctx, 'policy', p.id, parseInput(asOfArg, args).asOf),
    online: (p, _, ctx) => online(ctx, 'policy', p.id),
  },
  Claim: {
    __resolveReference: (ref) => ref,
    features: (c, args, ctx) => pointFeatures(ctx, 'claim', c.id, parseInput(asOfArg, args).asOf),
    online: (c, _, ctx) => online(ctx, 'claim', c.id),
  },
  Machine: {
    __resolveReference: (ref) => ref,
    utilizationFeatures: (m, args, ctx) => pointFeatures(ctx, 'machine', m.id, parseInput(asOfArg, args).asOf),
  },
  EngineRun: {
    // A measurement of the computation that made this answer: an answer selecting it is not kept.
    milliseconds: (r) => {
      currentTrace()?.refuse('an engine run time measures one computation');
      return r.milliseconds;
    },
  },
};
