import { createRequire } from 'node:module';
import {
  ERRORS,
  errorCodeDef,
  isCompositeType,
  isCustomScalarType,
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  isSubtype,
  baseType,
  operationFromDocument,
  parseSelectionSet,
  Variable,
  type FieldSelection,
  type FragmentSelection,
  type NamedType,
  type Operation,
  type Schema,
  type Selection,
  type SelectionSet,
  type Type,
} from '@apollo/federation-internals';
import type { GraphQLDataSource } from '@apollo/gateway';
import { evaluateCondition, getResponseName, type DeferredNode, type FetchNode, type PlanNode, type QueryPlan, type QueryPlanSelectionNode, type ResponsePath } from '@apollo/query-planner';
import type { GatewayExecutionResult, GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import { executeSync, GraphQLError, Kind, OperationTypeNode, visit, type DocumentNode, type GraphQLFormattedError, type GraphQLSchema, type SelectionNode, type VariableDefinitionNode } from 'graphql';
import type { IncrementalItem, IncrementalSlot, SubsequentPayload } from './incremental.js';
import { tracingEnabled } from '../observability/tracing.js';

/*
 * The gateway's query-plan execution, compiled once per plan.
 *
 * `@apollo/gateway` executes a cached plan by rebuilding the operation from its document on every request
 * (`operationFromDocument`) and then shaping the merged subgraph answers by walking that operation against
 * the schema (`computeResponse`): every field's type looked up through the federation model, every value's
 * outcome an object of its own. That walk was a quarter of the gateway's CPU on the federated query. Here
 * each plan is compiled the first time it runs: the operation is built once, and the shaping becomes a tree
 * of plain records (response name, the type's wrappers, the leaf's kind, the fragment's set of matching
 * type names, the @skip/@include test) walked with no schema lookups and no per-value objects.
 *
 * The semantics are `@apollo/gateway` 2.14.4's, line for line: the same fetches in the same order, the same
 * merging, error paths, messages and codes (DOWNSTREAM_SERVICE_ERROR, INVALID_GRAPHQL, the subgraph's own),
 * the same null propagation and `valueCompletion` extension. With OpenTelemetry tracing on, or Apollo usage
 * traces asked for, the stock execution runs instead, so its spans and traces stay what they were; except
 * for plans with deferred fragments (`@defer`), which the stock execution cannot run. Those are run here,
 * as one answer or as an initial payload and the ones after it (gateway/execution/incremental.ts).
 */

const require = createRequire(import.meta.url);

const hasOwn = (obj: object, key: string) => Object.prototype.hasOwnProperty.call(obj, key);

type ResultMap = Record<string, unknown>;
type ExecuteQueryPlan = (
  queryPlan: QueryPlan,
  serviceMap: Record<string, GraphQLDataSource>,
  requestContext: GatewayGraphQLRequestContext,
  operationContext: OperationContext,
  supergraphSchema: GraphQLSchema,
  apiSchema: Schema,
  telemetryConfig?: unknown,
) => Promise<GatewayExecutionResult>;

interface OperationContext {
  schema: GraphQLSchema;
  operation: import('graphql').OperationDefinitionNode;
  fragments: Record<string, import('graphql').FragmentDefinitionNode>;
}

interface PlanModule {
  executeQueryPlan: ExecuteQueryPlan;
  generateHydratedPaths(parent: ResponsePath, path: ResponsePath, data: ResultMap | null, result: ResponsePath[]): void;
}
interface RewritesModule {
  applyRewrites(schema: GraphQLSchema, rewrites: FetchNode['outputRewrites'], value: unknown): void;
  isObjectOfType(schema: GraphQLSchema, obj: ResultMap, typeCondition: string, defaultOnUnknownObjectType?: boolean): boolean;
}

// The gateway's own modules, for the pieces kept as they are (rewrites, merging, hydrated error paths).
const planModule = require('@apollo/gateway/dist/executeQueryPlan.js') as PlanModule;
const { applyRewrites, isObjectOfType } = require('@apollo/gateway/dist/dataRewrites.js') as RewritesModule;
const { deepMerge } = require('@apollo/gateway/dist/utilities/deepMerge.js') as { deepMerge(target: unknown, source: unknown): unknown };
const INCOMING_OPERATION = (require('@apollo/gateway/dist/datasources/types.js') as { GraphQLDataSourceRequestKind: { INCOMING_OPERATION: string } })
  .GraphQLDataSourceRequestKind.INCOMING_OPERATION;

const stockExecuteQueryPlan = planModule.executeQueryPlan;
let installed = false;
let compiledOn = true;

/**
 * Makes every `ApolloGateway` of this process execute plans compiled once per plan (see above), or, with
 * `enabled` false, run `@apollo/gateway`'s own execution again (GATEWAY_COMPILED_EXECUTION=false). The
 * setting is the process's: a gateway process serves one gateway. Throws if `@apollo/gateway` no longer
 * has the seam, so an upgrade that moves it fails at start.
 */
export function installCompiledExecution(enabled = true): void {
  compiledOn = enabled;
  if (installed) return;
  if (typeof stockExecuteQueryPlan !== 'function' || typeof planModule.generateHydratedPaths !== 'function') {
    throw new Error('@apollo/gateway no longer exports executeQueryPlan from dist/executeQueryPlan.js: revisit gateway/execution/plan-executor.ts');
  }
  planModule.executeQueryPlan = executeCompiled;
  installed = true;
}

/** Plans compiled so far, by plan: the gateway keeps one plan object per operation in its plan cache. */
const compiledPlans = new WeakMap<QueryPlan, CompiledOperation>();

/** Counts of executions, for tests: compiled, or handed to the stock execution. */
export const executionCounts = { compiled: 0, stock: 0 };

const executeCompiled: ExecuteQueryPlan = async (queryPlan, serviceMap, requestContext, operationContext, supergraphSchema, apiSchema, telemetryConfig) => {
  const deferring = hasDefer(queryPlan);
  if (!deferring && (!compiledOn || tracingEnabled() || requestContext.metrics?.captureTraces)) {
    executionCounts.stock += 1;
    return stockExecuteQueryPlan(queryPlan, serviceMap, requestContext, operationContext, supergraphSchema, apiSchema, telemetryConfig);
  }
  executionCounts.compiled += 1;
  let compiled = compiledPlans.get(queryPlan);
  if (!compiled) {
    let operation: Operation;
    try {
      operation = operationFromDocument(
        apiSchema,
        { kind: Kind.DOCUMENT, definitions: [operationContext.operation, ...Object.values(operationContext.fragments)] },
        { validate: false },
      );
    } catch (err) {
      if (err instanceof GraphQLError) return { errors: [err] };
      throw err;
    }
    compiled = compileOperation(operation);
    compiledPlans.set(queryPlan, compiled);
  }

  const errors: GraphQLError[] = [];
  const slot = (requestContext.context as { incremental?: IncrementalSlot }).incremental;
  const streaming = deferring && slot?.accepted === true && !slot.disabled;
  const context: ExecutionContext = {
    operation: compiled.operation,
    serviceMap,
    requestContext,
    supergraphSchema,
    errors,
    deferred: streaming ? { pending: [], primary: undefined, streamable: true } : null,
  };
  const unfilteredData: ResultMap = Object.create(null);
  const root: Cursor = { path: [], data: unfilteredData, fullResult: unfilteredData };
  if (queryPlan.node?.kind === 'Subscription') throw new Error('Execution of subscriptions not supported by gateway');
  if (queryPlan.node) await executeNode(context, queryPlan.node, root);

  const variables = requestContext.request.variables;
  const introspect = (selection: FieldSelection) =>
    executeIntrospection(operationContext.schema, selection.expandFragments().toSelectionNode(), operationContext.operation.variableDefinitions, variables);
  const deferred = context.deferred;
  if (deferred && deferred.pending.length > 0) {
    if (deferred.streamable && deferred.primary !== undefined) {
      // The initial payload: the primary part, shaped now (before any deferred fetch merges into the tree).
      const rootTypeName = apiSchema.schemaDefinition.rootType(compiled.operation.rootKind)!.name;
      const shape = deferred.primary === null ? null : compiled.part(deferred.primary, rootTypeName);
      const initial = shapedResult(() => (shape ? shape(unfilteredData, variables, introspect) : { data: {}, errors: [] }), errors, requestContext);
      slot!.subsequent = deferredPayloads({ context, compiled, unfilteredData, variables, introspect }, deferred.pending);
      return initial;
    }
    // Deferred fragments the response cannot be split at: everything now, one answer.
    await runWhole(context, deferred.pending);
  }
  return shapedResult(() => compiled!.shape(unfilteredData, variables, introspect), errors, requestContext);
};

/** The answer from a shaping, with @apollo/gateway's rules for fetch errors, shaping errors and failures. */
function shapedResult(
  shape: () => { data: ResultMap | null; errors: GraphQLError[] },
  errors: GraphQLError[],
  requestContext: GatewayGraphQLRequestContext,
): GatewayExecutionResult {
  let data: ResultMap | null;
  try {
    let shapingErrors: GraphQLError[];
    ({ data, errors: shapingErrors } = shape());
    if (errors.length === 0 && shapingErrors.length > 0) {
      return { extensions: { valueCompletion: shapingErrors }, data };
    }
  } catch (error) {
    if (error instanceof GraphQLError) return { errors: [error] };
    if (error instanceof Error) return { errors: [new GraphQLError(error.message, { originalError: error })] };
    (requestContext.logger ?? console).error('Unexpected error during query plan execution: ' + String(error));
    return { errors: [new GraphQLError('Unexpected error during query plan execution')] };
  }
  return errors.length === 0 ? { data } : { errors, data };
}

const deferPlans = new WeakMap<QueryPlan, boolean>();

/** Whether a plan has a Defer node (planned for an operation with `@defer`). */
function hasDefer(plan: QueryPlan): boolean {
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
    known = plan.node?.kind !== 'Subscription' && visit(plan.node as PlanNode | undefined);
    deferPlans.set(plan, known);
  }
  return known;
}

// ---------------------------------------------------------------------------------------------------
// Deferred fragments: run after the payload that holds them, each answered at every place it applies.

interface PendingDeferred {
  node: DeferredNode;
  cursor: Cursor;
}

/** Deferred parts met while executing: queued to run after the payload being built is sent. */
interface DeferQueue {
  pending: PendingDeferred[];
  /** The primary subselection of a Defer node at the response's root (null: nothing but deferred parts). */
  primary: string | null | undefined;
  /** False when a Defer node sat where no payload boundary can be drawn (not at the root). */
  streamable: boolean;
}

interface DeferRun {
  context: ExecutionContext;
  compiled: CompiledOperation;
  unfilteredData: ResultMap;
  variables: Record<string, unknown> | undefined;
  introspect: (selection: FieldSelection) => unknown;
}

/** Runs queued deferred parts (and the ones they queue) to the end, into the tree: for a whole answer. */
async function runWhole(context: ExecutionContext, pending: PendingDeferred[]): Promise<void> {
  const queue: DeferQueue = { pending: [], primary: undefined, streamable: false };
  const inner: ExecutionContext = { ...context, deferred: queue };
  await Promise.all(pending.map((d) => (d.node.node ? executeNode(inner, d.node.node, d.cursor) : undefined)));
  if (queue.pending.length > 0) await runWhole(context, queue.pending);
}

/** The payloads after the initial one: each deferred part's as soon as its own fetches return. */
async function* deferredPayloads(run: DeferRun, first: PendingDeferred[]): AsyncGenerator<SubsequentPayload> {
  const running = new Map<number, Promise<{ id: number; payload: Omit<SubsequentPayload, 'hasNext'>; more: PendingDeferred[] }>>();
  let next = 0;
  const start = (d: PendingDeferred) => {
    const id = next++;
    running.set(id, runDeferred(run, d).then((r) => ({ id, ...r })));
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
    const failure = error instanceof GraphQLError ? error : new GraphQLError(error instanceof Error ? error.message : String(error), { originalError: error instanceof Error ? error : undefined });
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
  for (const c of current) if (typeof c.value === 'object' && c.value !== null && !Array.isArray(c.value)) objects.push({ path: c.path, object: c.value as ResultMap });
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
          if ((selection as FieldSelection).element.responseName() === element) found.push(selection as FieldSelection);
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

// ---------------------------------------------------------------------------------------------------
// Plan execution: fetches, representations, merging and error paths as @apollo/gateway's executeNode.

interface ExecutionContext {
  operation: Operation;
  serviceMap: Record<string, GraphQLDataSource>;
  requestContext: GatewayGraphQLRequestContext;
  supergraphSchema: GraphQLSchema;
  errors: GraphQLError[];
  /** Where deferred parts wait (incremental delivery); null: they run in place, into one answer. */
  deferred: DeferQueue | null;
}

interface Cursor {
  path: ResponsePath;
  data: ResultMap | ResultMap[];
  fullResult: ResultMap;
}

async function executeNode(context: ExecutionContext, node: PlanNode, cursor: Cursor | undefined): Promise<void> {
  if (!cursor) return;
  switch (node.kind) {
    case 'Sequence':
      for (const child of node.nodes) await executeNode(context, child, cursor);
      return;
    case 'Parallel':
      await Promise.all(node.nodes.map((child) => executeNode(context, child, cursor)));
      return;
    case 'Flatten':
      return executeNode(context, node.node, moveIntoCursor(cursor, node.path));
    case 'Fetch':
      try {
        await executeFetch(context, node, cursor);
      } catch (error) {
        context.errors.push(error as GraphQLError);
      }
      return;
    case 'Condition': {
      const condition = evaluateCondition(node, context.operation.variableDefinitions, context.requestContext.request.variables);
      const branch = condition ? node.ifClause : node.elseClause;
      if (branch) await executeNode(context, branch, cursor);
      return;
    }
    case 'Defer': {
      if (node.primary.node) await executeNode(context, node.primary.node, cursor);
      const queue = context.deferred;
      if (!queue) {
        // One answer: the deferred parts run now, after the primary one they depend on.
        await Promise.all(node.deferred.map((d) => (d.node ? executeNode(context, d.node, cursor) : undefined)));
        return;
      }
      // The initial payload is the primary part of one Defer node at the root; anything else cannot be split.
      if (cursor.path.length === 0 && queue.primary === undefined) queue.primary = node.primary.subselection ?? null;
      else queue.streamable = false;
      for (const d of node.deferred) queue.pending.push({ node: d, cursor });
      return;
    }
  }
}

async function executeFetch(context: ExecutionContext, fetch: FetchNode, cursor: Cursor): Promise<void> {
  const service = context.serviceMap[fetch.serviceName];
  if (!service) throw new Error(`Couldn't find service with name "${fetch.serviceName}"`);
  const entities: ResultMap[] = Array.isArray(cursor.data) ? cursor.data.filter((e) => e !== null && e !== undefined) : [cursor.data];
  if (entities.length < 1) return;

  const variables: ResultMap = Object.create(null);
  if (fetch.variableUsages) {
    const provided = context.requestContext.request.variables;
    for (const name of fetch.variableUsages) {
      if (provided && hasOwn(provided, name) && typeof provided[name] !== 'undefined') variables[name] = provided[name];
    }
  }

  const sendOperation = async (vars: ResultMap): Promise<ResultMap | null | undefined> => {
    const response = await service.process({
      kind: INCOMING_OPERATION as never,
      request: { query: fetch.operation, variables: vars, operationName: fetch.operationName, http: undefined },
      incomingRequestContext: context.requestContext,
      context: context.requestContext.context,
      document: fetch.operationDocumentNode,
      pathInIncomingRequest: cursor.path,
    } as Parameters<GraphQLDataSource['process']>[0]);
    if (response.errors) {
      const errorPath = lazyErrorPath(fetch, cursor);
      const errors = response.errors.map((error) => downstreamServiceError(error, fetch.serviceName, errorPath));
      context.errors.push(...errors);
      if (!response.extensions?.['ftv1']) {
        const errorPaths = response.errors.map((error) => ({ subgraph: fetch.serviceName, path: error.path }));
        const metrics = context.requestContext.metrics as { nonFtv1ErrorPaths?: typeof errorPaths };
        if (metrics.nonFtv1ErrorPaths) metrics.nonFtv1ErrorPaths.push(...errorPaths);
        else metrics.nonFtv1ErrorPaths = errorPaths;
      }
    }
    return response.data as ResultMap | null | undefined;
  };

  if (!fetch.requires) {
    const received = await sendOperation(variables);
    if (received) applyRewrites(context.supergraphSchema, fetch.outputRewrites, received);
    for (const entity of entities) deepMerge(entity, received);
    return;
  }

  const representations: ResultMap[] = [];
  const representationToEntity: number[] = [];
  entities.forEach((entity, index) => {
    const representation = executeSelectionSet(context.supergraphSchema, entity, fetch.requires!);
    if (representation && representation['__typename']) {
      applyRewrites(context.supergraphSchema, fetch.inputRewrites, representation);
      representations.push(representation);
      representationToEntity.push(index);
    }
  });
  if (representations.length < 1) return;
  if ('representations' in variables) throw new Error('Variables cannot contain key "representations"');
  const received = await sendOperation({ ...variables, representations });
  if (!received) return;
  const receivedEntities = received['_entities'];
  if (!(receivedEntities && Array.isArray(receivedEntities))) throw new Error('Expected "data._entities" in response to be an array');
  if (receivedEntities.length !== representations.length) throw new Error(`Expected "data._entities" to contain ${representations.length} elements`);
  // As the gateway does: over the entities' count (an entity without a representation has none received).
  for (let i = 0; i < entities.length; i++) {
    const receivedEntity = receivedEntities[i] as ResultMap | null | undefined;
    const existing = entities[representationToEntity[i]!];
    if (receivedEntity && !receivedEntity['__typename']) receivedEntity['__typename'] = existing!['__typename'];
    applyRewrites(context.supergraphSchema, fetch.outputRewrites, receivedEntity);
    deepMerge(entities[representationToEntity[i]!], receivedEntity);
  }
}

function lazyErrorPath(fetch: FetchNode, cursor: Cursor): (errorPath: readonly (string | number)[] | undefined) => ResponsePath | undefined {
  let hydrated: ResponsePath[] | undefined;
  return (errorPath) => {
    if (fetch.requires && typeof errorPath?.[1] === 'number') {
      if (!hydrated) {
        hydrated = [];
        planModule.generateHydratedPaths([], cursor.path, cursor.fullResult, hydrated);
      }
      return [...(hydrated[errorPath[1]] ?? []), ...errorPath.slice(2)];
    }
    return errorPath ? [...cursor.path, ...errorPath.slice()] : undefined;
  };
}

function downstreamServiceError(
  original: GraphQLFormattedError,
  serviceName: string,
  errorPath: (path: readonly (string | number)[] | undefined) => ResponsePath | undefined,
): GraphQLError {
  const message = original.message || `Error while fetching subquery from service "${serviceName}"`;
  const options = {
    originalError: original as Error,
    path: errorPath(original.path),
    extensions: { ...original.extensions, serviceName },
  };
  const codeDef = errorCodeDef(original as GraphQLError);
  if (!codeDef && original.extensions?.['code']) return new GraphQLError(message, options);
  return (codeDef ?? ERRORS.DOWNSTREAM_SERVICE_ERROR).err(message, options);
}

function executeSelectionSet(schema: GraphQLSchema, source: ResultMap | null, selections: readonly QueryPlanSelectionNode[]): ResultMap | null {
  if (source === null) return null;
  const result: ResultMap = Object.create(null);
  for (const selection of selections) {
    if (selection.kind === 'Field') {
      const responseName = getResponseName(selection);
      const sub = selection.selections;
      const value = source[responseName];
      if (!hasOwn(source, responseName) || typeof value === 'undefined') return null;
      if (Array.isArray(value)) result[responseName] = value.map((v: ResultMap | null) => (sub ? executeSelectionSet(schema, v, sub) : v));
      else if (sub) result[responseName] = executeSelectionSet(schema, value as ResultMap | null, sub);
      else result[responseName] = value;
    } else {
      if (!selection.typeCondition || !source) continue;
      if (isObjectOfType(schema, source, selection.typeCondition)) deepMerge(result, executeSelectionSet(schema, source, selection.selections));
    }
  }
  return result;
}

function moveIntoCursor(cursor: Cursor, pathInCursor: ResponsePath): Cursor | undefined {
  const data = flattenResultsAtPath(cursor.data, pathInCursor);
  return data ? { path: cursor.path.concat(pathInCursor), data: data as ResultMap | ResultMap[], fullResult: cursor.fullResult } : undefined;
}

function flattenResultsAtPath(value: unknown, path: ResponsePath): unknown {
  if (path.length === 0) return value;
  if (value === undefined || value === null) return value;
  const [current, ...rest] = path;
  if (current === '@') return (value as unknown[]).flatMap((element) => flattenResultsAtPath(element, rest));
  if (typeof current !== 'string') throw new Error(`Unexpected ${typeof current} found in path`);
  if (Array.isArray(value)) throw new Error(`Unexpected array in result for path element ${current}`);
  const record = value as ResultMap;
  return flattenResultsAtPath(hasOwn(record, current) ? record[current] : undefined, rest);
}

function executeIntrospection(
  schema: GraphQLSchema,
  selection: SelectionNode,
  variableDefinitions: readonly VariableDefinitionNode[] | undefined,
  variableValues: Record<string, unknown> | undefined,
): unknown {
  const used = new Set<string>();
  visit(selection, { Variable: ({ name }) => void used.add(name.value) });
  const document: DocumentNode = {
    kind: Kind.DOCUMENT,
    definitions: [
      {
        kind: Kind.OPERATION_DEFINITION,
        operation: OperationTypeNode.QUERY,
        variableDefinitions: variableDefinitions?.filter((d) => used.has(d.variable.name.value)),
        selectionSet: { kind: Kind.SELECTION_SET, selections: [selection] },
      },
    ],
  };
  const { data, errors } = executeSync({ schema, document, rootValue: {}, variableValues });
  if ((errors && errors.length > 0) || !data) throw new Error(`Introspection query for ${JSON.stringify(selection)} should not have failed but got ${JSON.stringify(errors)}`);
  const key = selection.kind === Kind.FIELD ? (selection.alias?.value ?? selection.name.value) : '';
  return hasOwn(data, key) ? data[key] : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Result shaping, compiled: @apollo/gateway's computeResponse over records built once per operation.

/** A value's shape along its type's wrappers. `sel`: the field has a selection set. */
type ValueShape =
  | { kind: 'nonNull'; of: ValueShape; sel: boolean; typeStr: string }
  | { kind: 'list'; of: ValueShape; sel: boolean; typeStr: string }
  | { kind: 'composite'; selections: SelectionShape[]; typeName: string; sel: boolean; typeStr: string; plain: boolean }
  | { kind: 'leaf'; leaf: LeafKind; enumValues: ReadonlySet<string> | null; sel: boolean; typeStr: string };

type LeafKind = 'custom' | 'boolean' | 'int' | 'id' | 'float' | 'string' | 'enum';

/** A test of @skip / @include against the request's variables (with the operation's defaults). */
type SkipTest = (variables: ResultMap) => boolean;

type SelectionShape =
  | { kind: 'introspection'; responseName: string; skip: SkipTest | null; selection: FieldSelection }
  | { kind: 'typename'; responseName: string; skip: SkipTest | null }
  | { kind: 'field'; responseName: string; skip: SkipTest | null; value: ValueShape }
  | { kind: 'fragment'; skip: SkipTest | null; matches: ReadonlySet<string> | null; typeConditionName: string | null; selections: SelectionShape[] };

interface SchemaFacts {
  all: ReadonlySet<string>;
  objects: ReadonlySet<string>;
  composites: ReadonlySet<string>;
  named: ReadonlyMap<string, NamedType>;
}

const schemaFacts = new WeakMap<Schema, SchemaFacts>();

function factsOf(schema: Schema): SchemaFacts {
  let facts = schemaFacts.get(schema);
  if (!facts) {
    const named = new Map<string, NamedType>();
    for (const type of schema.allTypes()) named.set(type.name, type);
    const names = [...named.keys()];
    facts = {
      all: new Set(names),
      objects: new Set(names.filter((n) => isObjectType(named.get(n)!))),
      composites: new Set(names.filter((n) => isCompositeType(named.get(n)!))),
      named,
    };
    schemaFacts.set(schema, facts);
  }
  return facts;
}

interface CompiledOperation {
  operation: Operation;
  /** The whole operation's shaping. */
  shape: CompiledSelection;
  /** The shaping of a part of it (a query plan's primary or deferred subselection) on `parentTypeName`. */
  part(source: string, parentTypeName: string): CompiledSelection;
}

/** Compiles the operation's shaping once; `shape` then runs per request (`part` for deferred parts). Exported for tests. */
export function compileOperation(operation: Operation): CompiledOperation {
  const schema = operation.schema();
  const rootTypeName = schema.schemaDefinition.rootType(operation.rootKind)!.name;
  const whole = compileSelection(operation, operation.selectionSet, rootTypeName);
  const parts = new Map<string, CompiledSelection>();
  return {
    operation,
    shape: whole,
    part(source, parentTypeName) {
      const key = `${parentTypeName}\u0000${source}`;
      let compiled = parts.get(key);
      if (!compiled) {
        const parentType = schema.type(parentTypeName);
        if (!parentType || !isCompositeType(parentType)) throw new Error(`No composite type ${parentTypeName} for a deferred part`);
        const selectionSet = parseSelectionSet({ parentType, source, variableDefinitions: operation.variableDefinitions, validate: false });
        compiled = compileSelection(operation, selectionSet, parentTypeName);
        parts.set(key, compiled);
      }
      return compiled;
    },
  };
}

/** A selection's shaping: `input` (the merged answers at its object) shaped into a new object. */
type CompiledSelection = (
  input: ResultMap,
  variables: Record<string, unknown> | undefined,
  introspect: (selection: FieldSelection) => unknown,
  path?: readonly (string | number)[],
) => { data: ResultMap | null; errors: GraphQLError[] };

function compileSelection(operation: Operation, selectionSet: SelectionSet, parentTypeName: string): CompiledSelection {
  const schema = operation.schema();
  const facts = factsOf(schema);
  const leafKinds = new Map<NamedType, LeafKind>([
    [schema.booleanType(), 'boolean'],
    [schema.intType(), 'int'],
    [schema.idType(), 'id'],
    [schema.floatType(), 'float'],
  ]);
  const matchesCache = new Map<string, ReadonlySet<string>>();
  let usesVariables = false;

  const skipTest = (selection: Selection): SkipTest | null => {
    const element = selection.element;
    const skip = element.appliedDirectivesOf(schema.skipDirective())[0];
    const include = element.appliedDirectivesOf(schema.includeDirective())[0];
    if (!skip && !include) return null;
    const ifOf = (directive: NonNullable<typeof skip>): SkipTest => {
      const arg = (directive.arguments() as { if: unknown }).if;
      if (arg instanceof Variable) {
        usesVariables = true;
        const name = arg.name;
        const described = `${arg}`;
        const of = `${directive}`;
        return (variables) => {
          const value = variables[name];
          if (value === undefined || typeof value !== 'boolean') throw new Error(`Unexpected value ${String(value)} for variable ${described} of ${of}`);
          return value;
        };
      }
      const constant = Boolean(arg);
      return () => constant;
    };
    const skipIf = skip ? ifOf(skip) : null;
    const includeIf = include ? ifOf(include) : null;
    return (variables) => Boolean((skipIf && skipIf(variables)) || (includeIf && !includeIf(variables)));
  };

  const matches = (condition: NamedType): ReadonlySet<string> => {
    let set = matchesCache.get(condition.name);
    if (!set) {
      set = new Set([...facts.named.values()].filter((t) => isSubtype(condition as never, t as never)).map((t) => t.name));
      matchesCache.set(condition.name, set);
    }
    return set;
  };

  const valueShape = (type: Type, selectionSet: SelectionSet | undefined): ValueShape => {
    const sel = selectionSet !== undefined;
    const typeStr = type.toString();
    if (isNonNullType(type)) return { kind: 'nonNull', of: valueShape(type.ofType, selectionSet), sel, typeStr };
    if (isListType(type)) return { kind: 'list', of: valueShape(type.ofType, selectionSet), sel, typeStr };
    if (isCompositeType(type)) {
      const selections = selectionSet ? selectionShapes(selectionSet) : [];
      return { kind: 'composite', selections, typeName: type.name, sel, typeStr, plain: plainObjects(selections) };
    }
    const named = type as NamedType;
    const leaf: LeafKind = isCustomScalarType(named) ? 'custom' : isEnumType(named) ? 'enum' : (leafKinds.get(named) ?? 'string');
    const enumValues = isEnumType(named) ? new Set(named.values.map((v) => v.name)) : null;
    return { kind: 'leaf', leaf, enumValues, sel, typeStr };
  };

  const selectionShapes = (selectionSet: SelectionSet): SelectionShape[] =>
    selectionSet.selections().map((selection): SelectionShape => {
      const skip = skipTest(selection);
      if (selection.kind === 'FieldSelection') {
        const field = (selection as FieldSelection).element;
        const responseName = field.responseName();
        if (field.definition.isSchemaIntrospectionField()) return { kind: 'introspection', responseName, skip, selection: selection as FieldSelection };
        if (field.name === '__typename') return { kind: 'typename', responseName, skip };
        return { kind: 'field', responseName, skip, value: valueShape(field.definition.type!, selection.selectionSet) };
      }
      const fragment = (selection as FragmentSelection).element;
      const condition = fragment.typeCondition;
      return {
        kind: 'fragment',
        skip,
        matches: condition ? matches(condition) : null,
        typeConditionName: condition?.name ?? null,
        selections: selectionShapes(selection.selectionSet!),
      };
    });

  const root = selectionShapes(selectionSet);
  const rootPlain = plainObjects(root);
  const defaults = operation.collectDefaultedVariableValues();
  const hasDefaults = Object.keys(defaults).length > 0;

  return (input, variables, introspect, path = []) => {
    const state: ShapeState = {
      variables: usesVariables ? (hasDefaults ? { __proto__: null, ...defaults, ...variables } : { __proto__: null, ...variables }) : EMPTY,
      errors: [],
      introspect,
      path: [...path],
      invalid: false,
      hasErrors: false,
      facts,
    };
    const data: ResultMap = rootPlain ? {} : Object.create(null);
    const bubbled = applySelections(state, input, root, data, parentTypeName);
    return { data: bubbled ? null : data, errors: state.errors };
  };
}

/**
 * Whether the objects of a selection can be plain ones: they can unless a response name is one that
 * Object.prototype has (`__proto__`, `constructor`, `toString`, ...; then, as in @apollo/gateway, they have
 * no prototype, so reading a key not yet written finds nothing). Plain objects are made in fast mode and
 * written by JSON.stringify about a third faster than prototype-less ones, which V8 keeps as dictionaries.
 */
function plainObjects(selections: readonly SelectionShape[]): boolean {
  return selections.every((s) => (s.kind === 'fragment' ? plainObjects(s.selections) : !(s.responseName in Object.prototype)));
}

const EMPTY: ResultMap = Object.freeze(Object.create(null) as ResultMap);

interface ShapeState {
  variables: ResultMap;
  errors: GraphQLError[];
  introspect(selection: FieldSelection): unknown;
  path: (string | number)[];
  /** Set by `updateValue`: its value is invalid (a null where a non-null was owed), to bubble up. */
  invalid: boolean;
  /** Set by `updateValue`: an error was recorded for its value. */
  hasErrors: boolean;
  facts: SchemaFacts;
}


/** Shapes `input` into `output` along `selections`; true when a null bubbles up past this object. */
function applySelections(state: ShapeState, input: ResultMap, selections: readonly SelectionShape[], output: ResultMap, parentTypeName: string): boolean {
  for (const selection of selections) {
    if (selection.skip !== null && selection.skip(state.variables)) continue;
    switch (selection.kind) {
      case 'field': {
        const name = selection.responseName;
        const outputValue = output[name];
        const inputValue = (hasOwn(input, name) ? input[name] : undefined) ?? null;
        state.path.push(name);
        const updated = updateValue(state, outputValue, selection.value, inputValue, parentTypeName);
        output[name] = updated;
        state.path.pop();
        if (state.invalid) return true;
        break;
      }
      case 'typename': {
        const name = selection.responseName;
        if (output[name] !== undefined) break;
        let inputValue = (hasOwn(input, name) ? input[name] : undefined) ?? null;
        if (inputValue === null && name !== '__typename') inputValue = input['__typename'] ?? null;
        const typeName = typeof inputValue === 'string' && state.facts.all.has(inputValue) ? inputValue : parentTypeName;
        if (!state.facts.objects.has(typeName)) return true;
        output[name] = typeName;
        break;
      }
      case 'introspection':
        if (output[selection.responseName] === undefined) output[selection.responseName] = state.introspect(selection.selection);
        break;
      case 'fragment': {
        const typename = input['__typename'];
        if (typename && typeof typename !== 'string') throw new Error(`Got unexpected value for __typename: ${String(typename)}`);
        const applies = selection.matches === null || selection.matches.has(typeof typename === 'string' && typename !== '' ? typename : parentTypeName);
        if (applies && applySelections(state, input, selection.selections, output, selection.typeConditionName ?? parentTypeName)) return true;
        break;
      }
    }
  }
  return false;
}

function describeLast(path: readonly (string | number)[], typeStr: string, parentTypeName: string): string {
  const element = path[path.length - 1];
  return typeof element === 'string' ? `field ${parentTypeName}.${element}` : `array element of type ${typeStr} at index ${element}`;
}

const integerString = /^-?(?:0|[1-9][0-9]*)$/;

function validLeaf(shape: Extract<ValueShape, { kind: 'leaf' }>, value: unknown): boolean {
  const leaf = shape.leaf;
  if (leaf === 'custom') return true;
  if (typeof value === 'boolean') return leaf === 'boolean';
  if (typeof value === 'number' && isFinite(value)) {
    if (leaf === 'int' || leaf === 'id') return integerString.test(String(value));
    return leaf === 'float';
  }
  if (typeof value === 'string') {
    if (leaf === 'enum') return shape.enumValues!.has(value);
    return leaf !== 'boolean' && leaf !== 'int' && leaf !== 'float';
  }
  return false;
}

/** The shaped value; sets `state.invalid` and `state.hasErrors` as the gateway's result object would say. */
function updateValue(state: ShapeState, outputValue: unknown, shape: ValueShape, inputValue: unknown, parentTypeName: string): unknown {
  if (inputValue === undefined) throw new Error('Should not pass undefined for `inputValue` to this method');
  if (outputValue === null || (outputValue !== undefined && !shape.sel)) {
    state.invalid = false;
    state.hasErrors = false;
    return outputValue;
  }
  switch (shape.kind) {
    case 'nonNull': {
      const updated = updateValue(state, outputValue, shape.of, inputValue, parentTypeName);
      if (updated === null) {
        if (!state.hasErrors) {
          state.errors.push(
            ERRORS.INVALID_GRAPHQL.err(`Cannot return null for non-nullable ${describeLast(state.path, shape.of.typeStr, parentTypeName)}.`, { path: [...state.path] }),
          );
        }
        state.invalid = true;
        state.hasErrors = true;
        return null;
      }
      state.invalid = false;
      state.hasErrors = false;
      return updated;
    }
    case 'list': {
      if (inputValue === null) return settle(state, null);
      if (!Array.isArray(inputValue)) throw new Error(`Invalid non-list value ${String(inputValue)} returned by subgraph for list type ${shape.typeStr}`);
      if (outputValue !== undefined && !Array.isArray(outputValue)) throw new Error(`Invalid non-list value ${String(outputValue)} returned by subgraph for list type ${shape.typeStr}`);
      const previous = outputValue as unknown[] | undefined;
      const length = inputValue.length;
      if (previous !== undefined && previous.length !== length) throw new Error(`[${String(inputValue)}].length (${length}) !== [${String(previous)}].length (${previous.length})`);
      let nullify = false;
      let hasErrors = false;
      const updated: unknown[] = [];
      for (let i = 0; i < length; i++) {
        state.path.push(i);
        updated.push(updateValue(state, previous === undefined ? undefined : previous[i], shape.of, inputValue[i], parentTypeName));
        state.path.pop();
        nullify ||= state.invalid;
        hasErrors ||= state.hasErrors;
      }
      state.invalid = false;
      state.hasErrors = hasErrors;
      return nullify ? null : updated;
    }
    case 'composite': {
      if (inputValue === null) return settle(state, null);
      if (typeof inputValue !== 'object') throw new Error(`Invalid non-object value ${String(inputValue)} returned by subgraph for composite type ${shape.typeStr}`);
      if (outputValue !== undefined && typeof outputValue !== 'object') throw new Error(`Invalid non-object value ${String(inputValue)} returned by subgraph for composite type ${shape.typeStr}`);
      const record = inputValue as ResultMap;
      const inputTypename = record['__typename'];
      if (inputTypename !== undefined && typeof inputTypename !== 'string') throw new Error(`Invalid non-string value ${String(inputTypename)} for __typename at ${String(state.path)}`);
      let typeName = shape.typeName;
      if (inputTypename) {
        if (!state.facts.composites.has(inputTypename)) {
          state.errors.push(
            ERRORS.INVALID_GRAPHQL.err(`Invalid __typename found for object at ${describeLast(state.path, shape.typeStr, parentTypeName)}.`, { path: [...state.path] }),
          );
          state.invalid = false;
          state.hasErrors = true;
          return null;
        }
        typeName = inputTypename;
      }
      const output = outputValue !== undefined ? (outputValue as ResultMap) : shape.plain ? {} : (Object.create(null) as ResultMap);
      const bubbled = applySelections(state, record, shape.selections, output, typeName);
      state.invalid = false;
      state.hasErrors = bubbled;
      return bubbled ? null : output;
    }
    case 'leaf': {
      if (inputValue === null) return settle(state, null);
      if (outputValue !== undefined) throw new Error(`Excepted output to be undefined but got ${shape.typeStr} for type ${shape.typeStr}`);
      const valid = validLeaf(shape, inputValue);
      if (!valid) {
        state.errors.push(ERRORS.INVALID_GRAPHQL.err(`Invalid value found for ${describeLast(state.path, shape.typeStr, parentTypeName)}.`, { path: [...state.path] }));
      }
      state.invalid = false;
      state.hasErrors = !valid;
      return valid ? inputValue : null;
    }
  }
}

function settle(state: ShapeState, value: null): null {
  state.invalid = false;
  state.hasErrors = false;
  return value;
}
