import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { execute, parse, validate, type DocumentNode, type GraphQLError, type GraphQLFormattedError } from 'graphql';
import type { SubgraphInstance } from '../platform/subgraph.js';
import type { GatewayContext } from './context.js';

const MAX_CACHED_DOCUMENTS = 500;

/** A subgraph request document, parsed and validated once. */
type Prepared = { document: DocumentNode } | { errors: readonly GraphQLError[] };

/**
 * Calls a subgraph in the same process: no HTTP hop, but the same contract as over the network. The
 * subgraph gets only the forwarded headers, validates the document against its own schema (its scalars
 * judge the literals the gateway passed on, as a subgraph server would), and its errors travel as
 * serialized JSON, so query plans and results are identical in one-process and distributed mode.
 */
export class InProcessDataSource implements GraphQLDataSource<GatewayContext> {
  private readonly documents = new Map<string, Prepared>();

  constructor(
    private readonly subgraph: SubgraphInstance,
    private readonly onInternalError: (error: unknown) => void,
  ) {}

  async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    const query = options.request.query ?? '';
    // Health checks carry no incoming request, so no headers to forward.
    const headers = 'incomingRequestContext' in options ? options.context.headers : {};
    const prepared = this.prepare(query);
    if ('errors' in prepared) {
      return { errors: prepared.errors.map((e) => ({ ...e.toJSON(), extensions: { ...e.extensions, code: 'GRAPHQL_VALIDATION_FAILED' } })) };
    }
    const result = await execute({
      schema: this.subgraph.schema,
      document: prepared.document,
      variableValues: options.request.variables ?? {},
      operationName: options.request.operationName ?? null,
      contextValue: this.subgraph.context({ headers }),
    });
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

  private prepare(query: string): Prepared {
    let prepared = this.documents.get(query);
    if (!prepared) {
      const document = parse(query);
      const errors = validate(this.subgraph.schema, document);
      prepared = errors.length > 0 ? { errors } : { document };
      if (this.documents.size >= MAX_CACHED_DOCUMENTS) this.documents.delete(this.documents.keys().next().value!);
      this.documents.set(query, prepared);
    }
    return prepared;
  }
}
