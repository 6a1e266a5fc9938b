import type { GraphQLError, GraphQLFormattedError } from 'graphql';

/**
 * How a subgraph's errors leave it, in process and over the network alike: a catalogued code passes as is;
 * an error graphql-js raised about the request itself (variables that do not coerce, an unknown field)
 * is the caller's (BAD_USER_INPUT); anything else is a fault of ours: logged, its message never shown.
 */
export function serializeSubgraphError(
  error: GraphQLError,
  onInternalError: (error: unknown) => void,
  /** True when execution never started (no `data`): every error is then about the request. */
  requestError = false,
): GraphQLFormattedError {
  const formatted = error.toJSON();
  if (formatted.extensions?.['code']) return formatted;
  if (requestError || !error.originalError) return { ...formatted, extensions: { ...formatted.extensions, code: 'BAD_USER_INPUT' } };
  onInternalError(error.originalError);
  return {
    message: 'Internal server error',
    ...(formatted.path ? { path: formatted.path } : {}),
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
  };
}

/** The error a caller sees for a field whose subgraph cannot be reached. */
export function upstreamUnavailable(service: string): GraphQLFormattedError {
  return { message: `Subgraph ${service} is unavailable`, extensions: { code: 'UPSTREAM_UNAVAILABLE', serviceName: service } };
}
