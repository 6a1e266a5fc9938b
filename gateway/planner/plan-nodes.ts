import { ERRORS, errorCodeDef, type Operation } from '@apollo/federation-internals';
import type { GraphQLDataSource } from '@apollo/gateway';
import {
  evaluateCondition,
  getResponseName,
  type DeferredNode,
  type FetchNode,
  type PlanNode,
  type QueryPlanSelectionNode,
  type ResponsePath,
} from '@apollo/query-planner';
import type { GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import { GraphQLError, type GraphQLFormattedError, type GraphQLSchema } from 'graphql';
import { applyRewrites, deepMerge, generateHydratedPaths, INCOMING_OPERATION, isObjectOfType } from './apollo-seam.js';

/*
 * Plan execution: fetches, representations, merging and error paths as @apollo/gateway's executeNode
 * (dist/executeQueryPlan.js), with deferred parts queued for gateway/planner/plan-defer.ts.
 */

/** Own properties only: merged answers are plain objects, possibly keyed `__proto__` or `constructor`. */
export const hasOwn = (obj: object, key: string) => Object.prototype.hasOwnProperty.call(obj, key);

export type ResultMap = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------------
// Plan execution: fetches, representations, merging and error paths as @apollo/gateway's executeNode.

export interface PendingDeferred {
  node: DeferredNode;
  cursor: Cursor;
}

/** Deferred parts met while executing: queued to run after the payload being built is sent. */
export interface DeferQueue {
  pending: PendingDeferred[];
  /** The primary subselection of a Defer node at the response's root (null: nothing but deferred parts). */
  primary: string | null | undefined;
  /** False when a Defer node sat where no payload boundary can be drawn (not at the root). */
  streamable: boolean;
}

export interface ExecutionContext {
  operation: Operation;
  serviceMap: Record<string, GraphQLDataSource>;
  requestContext: GatewayGraphQLRequestContext;
  supergraphSchema: GraphQLSchema;
  errors: GraphQLError[];
  /** Where deferred parts wait (incremental delivery); null: they run in place, into one answer. */
  deferred: DeferQueue | null;
}

export interface Cursor {
  path: ResponsePath;
  data: ResultMap | ResultMap[];
  fullResult: ResultMap;
}

export async function executeNode(context: ExecutionContext, node: PlanNode, cursor: Cursor | undefined): Promise<void> {
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
        await Promise.all(node.deferred.flatMap((d) => (d.node ? [executeNode(context, d.node, cursor)] : [])));
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

  const variables = Object.create(null) as ResultMap;
  if (fetch.variableUsages) {
    const provided = context.requestContext.request.variables;
    for (const name of fetch.variableUsages) {
      if (provided && hasOwn(provided, name) && typeof provided[name] !== 'undefined') variables[name] = provided[name];
    }
  }

  const sendOperation = async (vars: ResultMap): Promise<ResultMap | null | undefined> => {
    const response = await service.process({
      kind: INCOMING_OPERATION,
      request: { query: fetch.operation, variables: vars, operationName: fetch.operationName, http: undefined },
      incomingRequestContext: context.requestContext,
      context: context.requestContext.context,
      document: fetch.operationDocumentNode,
      pathInIncomingRequest: cursor.path,
    });
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
    applyRewrites(context.supergraphSchema, fetch.outputRewrites, receivedEntity as ResultMap);
    deepMerge(entities[representationToEntity[i]!], receivedEntity);
  }
}

function lazyErrorPath(fetch: FetchNode, cursor: Cursor): (errorPath: readonly (string | number)[] | undefined) => ResponsePath | undefined {
  let hydrated: ResponsePath[] | undefined;
  return (errorPath) => {
    if (fetch.requires && typeof errorPath?.[1] === 'number') {
      if (!hydrated) {
        hydrated = [];
        generateHydratedPaths([], cursor.path, cursor.fullResult, hydrated);
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
  const codeDef = errorCodeDef(original);
  if (!codeDef && original.extensions?.['code']) return new GraphQLError(message, options);
  return (codeDef ?? ERRORS.DOWNSTREAM_SERVICE_ERROR).err(message, options);
}

function executeSelectionSet(schema: GraphQLSchema, source: ResultMap | null, selections: readonly QueryPlanSelectionNode[]): ResultMap | null {
  if (source === null) return null;
  const result = Object.create(null) as ResultMap;
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
