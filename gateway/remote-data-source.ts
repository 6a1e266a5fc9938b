import { RemoteGraphQLDataSource, type GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { parse, type GraphQLFormattedError } from 'graphql';
import { FORWARDED_HEADERS, type GatewayContext } from './context.js';
import { unavailableErrors } from './subgraph-errors.js';
import { injectTrace } from './tracing.js';

type Fetcher = RemoteGraphQLDataSource['fetcher'];

/**
 * Calls a subgraph that runs as its own server (distributed mode). The same headers travel as in process;
 * the subgraph is called with the gateway's own key (client credentials stop at the gateway). A subgraph
 * that cannot be reached, times out or fails without a GraphQL answer becomes UPSTREAM_UNAVAILABLE on the
 * fields it owns, and the rest of the query still resolves.
 */
export class RemoteDataSource extends RemoteGraphQLDataSource<GatewayContext> {
  constructor(
    private readonly service: string,
    url: string,
    private readonly options: { timeoutMs: number; apiKey: string | undefined; onFailure: (error: unknown) => void },
  ) {
    const fetcher = ((input: string, init?: RequestInit) =>
      fetch(input, { ...init, signal: AbortSignal.timeout(options.timeoutMs) })) as unknown as Fetcher;
    super({ url, fetcher });
  }

  override willSendRequest(options: GraphQLDataSourceProcessOptions<GatewayContext>): void {
    const headers = options.request.http?.headers;
    if (!headers) return;
    const incoming = 'incomingRequestContext' in options ? options.context.headers : {};
    for (const name of FORWARDED_HEADERS) {
      const value = incoming[name];
      if (value !== undefined) headers.set(name, value);
    }
    if (this.options.apiKey) headers.set('x-api-key', this.options.apiKey);
    // The trace goes on to the subgraph server (a no-op unless tracing is on).
    injectTrace(headers);
  }

  override async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    try {
      return await super.process(options);
    } catch (error) {
      // A GraphQL answer with a non-2xx status (variables that do not coerce: 400) is still an answer.
      const body = (error as { extensions?: { response?: { status?: number; body?: unknown } } }).extensions?.response;
      const errors = isGraphQLBody(body?.body) ? body.body.errors : undefined;
      if (errors && errors.length > 0 && (body?.status ?? 500) < 500) return { errors };
      this.options.onFailure(error);
      return { errors: unavailableErrors(this.service, parse(options.request.query ?? '{ __typename }'), options.request.variables ?? {}) };
    }
  }
}

function isGraphQLBody(value: unknown): value is { errors: GraphQLFormattedError[] } {
  return typeof value === 'object' && value !== null && Array.isArray((value as { errors?: unknown }).errors);
}
