import { baseType, type FieldSelection, type Operation, type SelectionSet } from '@apollo/federation-internals';
import { type PlanNode, type QueryPlan } from '@apollo/query-planner';
import { GraphQLError } from 'graphql';
import type { IncrementalItem, SubsequentPayload } from './incremental.js';
import { executeNode, type DeferQueue, type ExecutionContext, type PendingDeferred } from './plan-nodes.js';
import type { CompiledOperation } from './result-shaping.js';
import { type ResultMap, hasOwn } from './plan-nodes.js';

/*
 * Deferred fragments (`@defer`): run after the payload that holds them, each answered at every place it
 * applies, as @apollo/gateway would plan them (gateway/planner/incremental.ts sends the payloads).
 */

const deferPlans = new WeakMap<QueryPlan, boolean>();

/** Whether a plan has a Defer node (planned for an operation with `@defer`). */
export function hasDefer(plan: QueryPlan): boolean {
  let known = deferPlans.get(plan);
  if (known === undefined) {
    const visit = (node: PlanNode | undefined): boolean => {
      if (!node) return false;
      switch (node.kind) {
        case 'Defer':
          return true;
        case 'Sequence':
        case 'Parallel':
          return node.nodes.some(visit);
        case 'Flatten':
          return visit(node.node);
        case 'Condition':
          return visit(node.ifClause) || visit(node.elseClause);
        default:
          return false;
      }
    };
    known = plan.node?.kind !== 'Subscription' && visit(plan.node);
    deferPlans.set(plan, known);
  }
  return known;
}
// ---------------------------------------------------------------------------------------------------
// Deferred fragments: run after the payload that holds them, each answered at every place it applies.

interface DeferRun {
  context: ExecutionContext;
  compiled: CompiledOperation;
  unfilteredData: ResultMap;
  variables: Record<string, unknown> | undefined;
  introspect: (selection: FieldSelection) => unknown;
}

/** Runs queued deferred parts (and the ones they queue) to the end, into the tree: for a whole answer. */
export async function runWhole(context: ExecutionContext, pending: PendingDeferred[]): Promise<void> {
  const queue: DeferQueue = { pending: [], primary: undefined, streamable: false };
  const inner: ExecutionContext = { ...context, deferred: queue };
  await Promise.all(pending.flatMap((d) => (d.node.node ? [executeNode(inner, d.node.node, d.cursor)] : [])));
  if (queue.pending.length > 0) await runWhole(context, queue.pending);
}

/** The payloads after the initial one: each deferred part's as soon as its own fetches return. */
export async function* deferredPayloads(run: DeferRun, first: PendingDeferred[]): AsyncGenerator<SubsequentPayload> {
  const running = new Map<number, Promise<{ id: number; payload: Omit<SubsequentPayload, 'hasNext'>; more: PendingDeferred[] }>>();
  let next = 0;
  const start = (d: PendingDeferred) => {
    const id = next++;
    running.set(
      id,
      runDeferred(run, d).then((r) => ({ id, ...r })),
    );
  };
  first.forEach(start);
  while (running.size > 0) {
    const done = await Promise.race(running.values());
    running.delete(done.id);
    done.more.forEach(start);
    yield { ...done.payload, hasNext: running.size > 0 };
  }
}

async function runDeferred(run: DeferRun, d: PendingDeferred): Promise<{ payload: Omit<SubsequentPayload, 'hasNext'>; more: PendingDeferred[] }> {
  try {
    return await deferredPart(run, d);
  } catch (error) {
    // A fault of the gateway's own (not of a fetch, which has its item): the part's error, the stream goes on.
    const failure =
      error instanceof GraphQLError
        ? error
        : new GraphQLError(error instanceof Error ? error.message : String(error), { originalError: error instanceof Error ? error : undefined });
    return { payload: { incremental: [], errors: [failure] }, more: [] };
  }
}

async function deferredPart(run: DeferRun, d: PendingDeferred): Promise<{ payload: Omit<SubsequentPayload, 'hasNext'>; more: PendingDeferred[] }> {
  const queue: DeferQueue = { pending: [], primary: undefined, streamable: false };
  const errors: GraphQLError[] = [];
  const context: ExecutionContext = { ...run.context, errors, deferred: queue };
  try {
    if (d.node.node) await executeNode(context, d.node.node, d.cursor);
  } catch (error) {
    errors.push(error instanceof GraphQLError ? error : new GraphQLError(error instanceof Error ? error.message : String(error)));
  }
  // A deferred fragment holding deferred fragments of its own has no subselection: its plan is a Defer
  // node whose primary part is this payload's.
  const subselection = d.node.subselection ?? queue.primary ?? undefined;
  const parentTypeName = typeAtPath(run.compiled.operation, d.node.queryPath);
  const shape = subselection ? run.compiled.part(subselection, parentTypeName) : null;
  const items: IncrementalItem[] = [];
  for (const { path, object } of objectsAt(run.unfilteredData, d.node.queryPath)) {
    const item: IncrementalItem = { data: {}, path };
    if (d.node.label !== undefined) item.label = d.node.label;
    if (shape) {
      try {
        const shaped = shape(object, run.variables, run.introspect, path);
        item.data = shaped.data;
        if (shaped.errors.length > 0) item.extensions = { valueCompletion: shaped.errors };
      } catch (error) {
        item.data = null;
        errors.push(error instanceof GraphQLError ? error : new GraphQLError(error instanceof Error ? error.message : String(error)));
      }
    }
    items.push(item);
  }
  // Each error goes with the item it belongs under (the first, when its path names none).
  const unplaced: GraphQLError[] = [];
  for (const error of errors) {
    const at = error.path ? items.find((item) => item.path.every((p, i) => error.path![i] === p)) : undefined;
    const target = at ?? items[0];
    if (!target) {
      unplaced.push(error);
      continue;
    }
    if (target.extensions) delete target.extensions;
    (target.errors ??= []).push(error);
  }
  const payload: Omit<SubsequentPayload, 'hasNext'> = { incremental: items };
  if (unplaced.length > 0) payload.errors = unplaced;
  return { payload, more: queue.pending };
}

/**
 * The objects a deferred part applies to: the response's values along `queryPath` (response names, or
 * `... on Type` for a type condition), every element of the lists on the way, nulls left out.
 */
function objectsAt(root: ResultMap, queryPath: readonly string[]): { path: (string | number)[]; object: ResultMap }[] {
  let current: { path: (string | number)[]; value: unknown }[] = [{ path: [], value: root }];
  const spread = (path: (string | number)[], value: unknown, into: { path: (string | number)[]; value: unknown }[]) => {
    if (Array.isArray(value)) value.forEach((v, i) => spread([...path, i], v, into));
    else if (value !== null && value !== undefined) into.push({ path, value });
  };
  for (const element of queryPath) {
    const nextValues: { path: (string | number)[]; value: unknown }[] = [];
    if (element.startsWith('... on ')) {
      const typeName = element.slice('... on '.length).trim();
      for (const c of current) {
        const typename = (c.value as ResultMap)['__typename'];
        if (typename === undefined || typename === typeName) nextValues.push(c);
      }
    } else {
      for (const c of current) {
        const record = c.value as ResultMap;
        spread([...c.path, element], hasOwn(record, element) ? record[element] : undefined, nextValues);
      }
    }
    current = nextValues;
  }
  const objects: { path: (string | number)[]; object: ResultMap }[] = [];
  for (const c of current)
    if (typeof c.value === 'object' && c.value !== null && !Array.isArray(c.value)) objects.push({ path: c.path, object: c.value as ResultMap });
  return objects;
}

/** The type of the object at `queryPath` in the operation (response names through its selections). */
function typeAtPath(operation: Operation, queryPath: readonly string[]): string {
  const schema = operation.schema();
  let typeName = schema.schemaDefinition.rootType(operation.rootKind)!.name;
  let sets: SelectionSet[] = [operation.selectionSet];
  for (const element of queryPath) {
    if (element.startsWith('... on ')) {
      typeName = element.slice('... on '.length).trim();
      continue;
    }
    const found: FieldSelection[] = [];
    const search = (set: SelectionSet) => {
      for (const selection of set.selections()) {
        if (selection.kind === 'FieldSelection') {
          if (selection.element.responseName() === element) found.push(selection);
        } else if (selection.selectionSet) search(selection.selectionSet);
      }
    };
    sets.forEach(search);
    const field = found[0];
    if (!field) throw new Error(`No field ${element} on the deferred path ${queryPath.join('/')}`);
    typeName = baseType(field.element.definition.type!).name;
    sets = found.flatMap((f) => (f.selectionSet ? [f.selectionSet] : []));
  }
  return typeName;
}
