import { operationFromDocument, type FieldSelection, type Operation } from '@apollo/federation-internals';
import { type QueryPlan } from '@apollo/query-planner';
import type { GatewayExecutionResult, GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import { GraphQLError, Kind } from 'graphql';
import type { IncrementalSlot } from './incremental.js';
import { tracingEnabled } from '../observability/tracing.js';
import { replaceExecuteQueryPlan, stockExecuteQueryPlan, checkApolloGatewayVersion, type ExecuteQueryPlan } from './apollo-seam.js';
import { deferredPayloads, runWhole, hasDefer } from './plan-defer.js';
import { executeNode, type Cursor, type ExecutionContext } from './plan-nodes.js';
import { compileOperation, executeIntrospection, type CompiledOperation } from './result-shaping.js';
import { type ResultMap } from './plan-nodes.js';

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
 * as one answer or as an initial payload and the ones after it (gateway/planner/incremental.ts).
 */

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
  checkApolloGatewayVersion();
  replaceExecuteQueryPlan(executeCompiled);
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
  const unfilteredData = Object.create(null) as ResultMap;
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
  return shapedResult(() => compiled.shape(unfilteredData, variables, introspect), errors, requestContext);
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
