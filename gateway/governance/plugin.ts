import type { ApolloServerPlugin, GraphQLRequestContextDidResolveOperation, GraphQLRequestListener } from '@apollo/server';
import type { GatewayContext } from '../execution/context.js';
import type { UsageRecorder } from './usage.js';

/**
 * Counts every operation Apollo Server resolves (GraphQL over HTTP, queries and mutations on a socket, REST
 * routes) for field usage, once its document is known to be valid.
 */
export function usagePlugin(recorder: UsageRecorder): ApolloServerPlugin<GatewayContext> {
  const done = Promise.resolve();
  const listener: GraphQLRequestListener<GatewayContext> = {
    // Not an async function: counting is synchronous, and one settled promise serves every request.
    didResolveOperation: (request: GraphQLRequestContextDidResolveOperation<GatewayContext>) => {
      const context = request.contextValue;
      recorder.record(
        { ...context.client, principal: context.principal },
        request.source,
        request.document,
        request.operationName,
        request.request.variables,
        context.route,
      );
      return done;
    },
  };
  const started = Promise.resolve(listener);
  return { requestDidStart: () => started };
}
