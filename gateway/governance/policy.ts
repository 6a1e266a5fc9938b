import type { OperationPolicy } from '../execution/operation-policy.js';
import type { UsageRecorder } from './usage.js';

/**
 * Counts every operation the gateway resolves (GraphQL over HTTP, queries and mutations on a socket, REST
 * routes) for field usage, once its document is known to be valid.
 */
export function usagePolicy(recorder: UsageRecorder): OperationPolicy {
  return {
    resolved({ context, source, document, operationName, variables }) {
      recorder.record({ ...context.client, principal: context.principal }, source, document, operationName, variables, context.route);
    },
  };
}
