import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { execute, parse, type DocumentNode } from 'graphql';
import type { SubgraphInstance } from '../platform/subgraph.js';
import type { GatewayContext } from './context.js';
import { serializeSubgraphError, unavailableErrors } from './subgraph-errors.js';

const MAX_CACHED_DOCUMENTS = 500;

/**
 * Calls a subgraph in the same process: no HTTP hop, but the same contract as over the network. The
 * subgraph gets only the forwarded headers, and its errors travel as serialized JSON, so query plans and
 * results are identical in one-process and distributed mode.
 */
export class InProcessDataSource implements GraphQLDataSource<GatewayContext> {
  private readonly documents = new Map<string, DocumentNode>();

  constructor(
    private readonly service: string,
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
      return { errors: unavailableErrors(this.service, document, variables) };
    }
    const response: GatewayGraphQLResponse = {};
    if (result.data !== undefined) response.data = result.data;
    // Without data, execution never started: the request itself was bad (variables that do not coerce).
    const requestError = !('data' in result);
    if (result.errors) response.errors = result.errors.map((e) => serializeSubgraphError(e, this.onInternalError, requestError));
    return response;
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
