import { parse, subscribe, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import type { UpstreamOpener, UpstreamResult } from './executor.js';

/** Opens subscription operations on subgraphs running in this process (graphql-js `subscribe`). */
export function inProcessUpstream(
  subgraphs: ReadonlyMap<string, SubgraphInstance>,
  onInternalError: (error: unknown) => void,
): UpstreamOpener {
  return async (service, request, context): Promise<UpstreamResult> => {
    const instance = subgraphs.get(service);
    if (!instance) {
      return { errors: [{ message: `Subgraph ${service} is unavailable`, extensions: { code: 'UPSTREAM_UNAVAILABLE' } }] };
    }
    const result = await subscribe({
      schema: instance.schema,
      document: parse(request.query),
      variableValues: request.variables,
      operationName: request.operationName ?? null,
      contextValue: instance.context({ headers: context.headers }),
    });
    if (Symbol.asyncIterator in result) return result as AsyncIterableIterator<ExecutionResult>;
    return { errors: (result.errors ?? []).map((e) => serialize(e.toJSON(), e.originalError, onInternalError)) };
  };
}

function serialize(error: GraphQLFormattedError, original: Error | undefined, onInternalError: (e: unknown) => void): GraphQLFormattedError {
  if (error.extensions?.['code']) return error;
  if (!original) return { ...error, extensions: { code: 'BAD_USER_INPUT' } };
  onInternalError(original);
  return { ...error, message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}
