import { Kind, type DocumentNode, type GraphQLError, type GraphQLFormattedError, type SelectionSetNode } from 'graphql';
import { DATABASE_UNAVAILABLE_MESSAGE, isDatabaseUnavailable } from '../../platform/db-errors.js';

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
  if (isDatabaseUnavailable(error)) return databaseUnavailable(formatted);
  if (formatted.extensions?.['code']) return formatted;
  if (requestError || !error.originalError) return { ...formatted, extensions: { ...formatted.extensions, code: 'BAD_USER_INPUT' } };
  onInternalError(error.originalError);
  return {
    message: 'Internal server error',
    ...(formatted.path ? { path: formatted.path } : {}),
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
  };
}

/** A field that failed because the database cannot be reached: SERVICE_UNAVAILABLE, never an internal error. */
export function databaseUnavailable(formatted: GraphQLFormattedError): GraphQLFormattedError {
  return { ...formatted, message: DATABASE_UNAVAILABLE_MESSAGE, extensions: { ...formatted.extensions, code: 'SERVICE_UNAVAILABLE' } };
}

/** The error a caller sees for a field whose subgraph cannot be reached. */
export function upstreamUnavailable(service: string): GraphQLFormattedError {
  return { message: `Subgraph ${service} is unavailable`, extensions: { code: 'UPSTREAM_UNAVAILABLE', serviceName: service } };
}

/**
 * One UPSTREAM_UNAVAILABLE error per field the failed operation asked for, at that field's path (for an
 * entity fetch, each representation's fields), so the gateway nulls exactly the fields this subgraph owns.
 */
export function unavailableErrors(service: string, document: DocumentNode, variables: Record<string, unknown>): GraphQLFormattedError[] {
  const unavailable = upstreamUnavailable(service);
  const operation = document.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
  const errors: GraphQLFormattedError[] = [];
  for (const selection of operation?.selectionSet.selections ?? []) {
    if (selection.kind !== Kind.FIELD) continue;
    const key = selection.alias?.value ?? selection.name.value;
    if (selection.name.value !== '_entities') {
      errors.push({ ...unavailable, path: [key] });
      continue;
    }
    const representations = Array.isArray(variables['representations']) ? variables['representations'].length : 0;
    const fields = entityFields(selection.selectionSet);
    for (let i = 0; i < representations; i++) for (const field of fields) errors.push({ ...unavailable, path: [key, i, field] });
  }
  return errors.length > 0 ? errors : [{ ...unavailable }];
}

/** Response keys selected on the entities (through the `... on Type` fragments), without __typename. */
function entityFields(selectionSet: SelectionSetNode | undefined): string[] {
  const keys = new Set<string>();
  for (const selection of selectionSet?.selections ?? []) {
    if (selection.kind === Kind.FIELD && selection.name.value !== '__typename') keys.add(selection.alias?.value ?? selection.name.value);
    if (selection.kind === Kind.INLINE_FRAGMENT) for (const key of entityFields(selection.selectionSet)) keys.add(key);
  }
  return [...keys];
}
