import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { execute, Kind, parse, type DocumentNode, type GraphQLFormattedError, type SelectionSetNode } from 'graphql';
import type { SubgraphInstance } from '../platform/subgraph.js';
import type { GatewayContext } from './context.js';

const MAX_CACHED_DOCUMENTS = 500;

/**
 * Calls a subgraph in the same process: no HTTP hop, but the same contract as over the network. The
 * subgraph gets only the forwarded headers, and its errors travel as serialized JSON, so query plans and
 * results are identical in one-process and distributed mode.
 */
export class InProcessDataSource implements GraphQLDataSource<GatewayContext> {
  private readonly documents = new Map<string, DocumentNode>();

  constructor(
    private readonly subgraph: SubgraphInstance,
    private readonly onInternalError: (error: unknown) => void,
  ) {}

  async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    const query = options.request.query ?? '';
    const document = this.document(query);
    const variables = options.request.variables ?? {};
    // Health checks carry no incoming request, so no headers to forward.
    const headers = 'incomingRequestContext' in options ? options.context.headers : {};
    let result: Awaited<ReturnType<typeof execute>>;
    try {
      result = await execute({
        schema: this.subgraph.schema,
        document,
        variableValues: variables,
        operationName: options.request.operationName ?? null,
        contextValue: this.subgraph.context({ headers }),
      });
    } catch (error) {
      // The subgraph could not answer at all: as over the network, its fields fail and the rest stands.
      this.onInternalError(error);
      return { errors: unavailableErrors(document, variables) };
    }
    const response: GatewayGraphQLResponse = {};
    if (result.data !== undefined) response.data = result.data;
    // Without data, execution never started: the request itself was bad (variables that do not coerce).
    const requestError = !('data' in result);
    if (result.errors) response.errors = result.errors.map((e) => this.serialize(e.toJSON(), e.originalError, requestError));
    return response;
  }

  private serialize(error: GraphQLFormattedError, original: Error | undefined, requestError: boolean): GraphQLFormattedError {
    if (error.extensions?.['code']) return error;
    if (requestError) return { ...error, extensions: { ...error.extensions, code: 'BAD_USER_INPUT' } };
    // An error without a catalogued code is a fault of ours: log it, never show its message.
    this.onInternalError(original ?? error);
    return { ...error, message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  }

  private document(query: string): DocumentNode {
    let doc = this.documents.get(query);
    if (!doc) {
      doc = parse(query);
      if (this.documents.size >= MAX_CACHED_DOCUMENTS) this.documents.delete(this.documents.keys().next().value!);
      this.documents.set(query, doc);
    }
    return doc;
  }
}

const UNAVAILABLE = { message: 'Subgraph unavailable', extensions: { code: 'UPSTREAM_UNAVAILABLE' } } as const;

/**
 * One UPSTREAM_UNAVAILABLE error per field the failed operation asked for, at that field's path (for an
 * entity fetch, each representation's fields), so the gateway nulls exactly the fields this subgraph owns.
 */
export function unavailableErrors(document: DocumentNode, variables: Record<string, unknown>): GraphQLFormattedError[] {
  const operation = document.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
  const errors: GraphQLFormattedError[] = [];
  for (const selection of operation?.selectionSet.selections ?? []) {
    if (selection.kind !== Kind.FIELD) continue;
    const key = selection.alias?.value ?? selection.name.value;
    if (selection.name.value !== '_entities') {
      errors.push({ ...UNAVAILABLE, path: [key] });
      continue;
    }
    const representations = Array.isArray(variables['representations']) ? variables['representations'].length : 0;
    const fields = entityFields(selection.selectionSet);
    for (let i = 0; i < representations; i++) for (const field of fields) errors.push({ ...UNAVAILABLE, path: [key, i, field] });
  }
  return errors.length > 0 ? errors : [{ ...UNAVAILABLE }];
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
