import type { GatewayExecutor, GatewayInterface, GatewaySchemaLoadOrUpdateCallback } from '@apollo/server-gateway-interface';
import { stateExtension, StateTrace, traceRequest } from '../../platform/state-trace.js';
import { execute, Kind, OperationTypeNode, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import type { CompiledQuery } from 'graphql-jit';
import { compiledOrNull, compiledSubgraphExecution, subgraphExecutionCounts } from '../sources/in-process-data-source.js';

/*
 * A subgraph server's execution: Apollo Server parses, validates, authorizes and formats, and an
 * operation then runs compiled by graphql-jit (once per document and operation, kept as long as Apollo's
 * document cache keeps the parsed document), as the same subgraph runs when the gateway calls it in process.
 * graphql-js runs what the compiler declines, introspection, a subscription sent over HTTP, and
 * everything with SUBGRAPH_COMPILED_EXECUTION=false. Apollo Server takes a custom executor only from a gateway, so the
 * subgraph's schema is served as a gateway's that never changes.
 */

export function compiledSubgraphGateway(schema: GraphQLSchema, sdl: string): GatewayInterface {
  const compiledByDocument = new WeakMap<DocumentNode, Map<string, CompiledQuery | null>>();
  const compiledFor = async (document: DocumentNode, operation: OperationDefinitionNode, operationName: string | null): Promise<CompiledQuery | null> => {
    let byOperation = compiledByDocument.get(document);
    if (!byOperation) compiledByDocument.set(document, (byOperation = new Map<string, CompiledQuery | null>()));
    const key = operationName ?? '';
    let compiled = byOperation.get(key);
    if (compiled === undefined) {
      compiled = interpretedOnly(operation) ? null : await compiledOrNull(schema, document, operationName ?? undefined);
      byOperation.set(key, compiled);
    }
    return compiled;
  };
  // What each operation read and wrote of the state travels back in `extensions.state` (platform/state-trace.ts).
  const executor: GatewayExecutor = async (request) => {
    const trace = new StateTrace();
    const result = await traceRequest(trace, () => run(request));
    const state = stateExtension(trace);
    return state ? { ...result, extensions: { ...result.extensions, state } } : result;
  };
  const run: GatewayExecutor = async (request) => {
    const { document, operation, operationName, context } = request;
    const variables = request.request.variables ?? {};
    const compiled = compiledSubgraphExecution() ? await compiledFor(document, operation, operationName) : null;
    const interpreted = () => execute({ schema, document, operationName, variableValues: variables, contextValue: context });
    if (!compiled) {
      subgraphExecutionCounts.interpreted += 1;
      return interpreted();
    }
    subgraphExecutionCounts.compiled += 1;
    const result = await compiled.query(undefined, context, variables);
    // Without data, execution never started: variables that do not coerce. graphql-js says why, in the
    // words (and with the BAD_USER_INPUT code) every other path gives; nothing has run, so nothing runs twice.
    return 'data' in result ? result : interpreted();
  };
  let loaded: GatewaySchemaLoadOrUpdateCallback | undefined;
  return {
    onSchemaLoadOrUpdate(callback) {
      loaded = callback;
      return () => (loaded = undefined);
    },
    async load() {
      loaded?.({ apiSchema: schema, coreSupergraphSdl: sdl });
      return { executor };
    },
    async stop() {},
  };
}

/**
 * Whether graphql-js runs an operation: a subscription (over HTTP it ran on graphql-js before, and keeps its
 * answer), or one that reads the schema itself (`__schema`, `__type` at its root) or may (fragments at its
 * root are not looked into).
 */
function interpretedOnly(operation: OperationDefinitionNode): boolean {
  if (operation.operation === OperationTypeNode.SUBSCRIPTION) return true;
  return operation.selectionSet.selections.some((s) => s.kind !== Kind.FIELD || (s.name.value.startsWith('__') && s.name.value !== '__typename'));
}
