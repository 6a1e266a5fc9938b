import { parse, subscribe, type ExecutionResult } from 'graphql';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import { serializeSubgraphError, upstreamUnavailable } from '../sources/subgraph-errors.js';
import type { UpstreamOpener, UpstreamResult } from './executor.js';

/** Opens subscription operations on subgraphs running in this process (graphql-js `subscribe`). */
export function inProcessUpstream(subgraphs: ReadonlyMap<string, SubgraphInstance>, onInternalError: (error: unknown) => void): UpstreamOpener {
  return async (service, request, context): Promise<UpstreamResult> => {
    const instance = subgraphs.get(service);
    if (!instance) return { errors: [upstreamUnavailable(service)] };
    const result = await subscribe({
      schema: instance.schema,
      document: parse(request.query),
      variableValues: request.variables,
      operationName: request.operationName ?? null,
      contextValue: instance.context({ headers: context.headers, principal: context.principal }),
    });
    if (Symbol.asyncIterator in result) return result as AsyncIterableIterator<ExecutionResult>;
    return { errors: (result.errors ?? []).map((e) => serializeSubgraphError(e, onInternalError, true)) };
  };
}
