import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { tracer, tracingEnabled } from '../observability/tracing.js';
import { execute, parse, validate, type DocumentNode, type ExecutionResult, type GraphQLError, type GraphQLSchema } from 'graphql';
import type { CompiledQuery } from 'graphql-jit';
import { SYSTEM_PRINCIPAL } from '../../platform/principal.js';
import { stateExtension, StateTrace, traceRequest } from '../../platform/state-trace.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import type { GatewayContext } from '../pipeline/context.js';
import { serializeSubgraphError, unavailableErrors } from './subgraph-errors.js';

const MAX_CACHED_DOCUMENTS = 500;

let compiledSubgraphs = true;

/**
 * Whether subgraphs run their documents compiled (graphql-jit, once per document: no per-field
 * resolve-info, argument and path objects as graphql-js makes them) or with graphql-js's `execute`
 * (SUBGRAPH_COMPILED_EXECUTION=false), called in process or served on their own. The setting is the process's.
 */
export function setCompiledSubgraphExecution(enabled: boolean): void {
  compiledSubgraphs = enabled;
}

/** Whether subgraphs run their documents compiled now (the process's setting). */
export function compiledSubgraphExecution(): boolean {
  return compiledSubgraphs;
}

/** Documents executed compiled and by graphql-js, for tests. */
export const subgraphExecutionCounts = { compiled: 0, interpreted: 0 };

/**
 * A subgraph request document, parsed and validated once, and compiled once (graphql-jit) unless the
 * compiler declines it (then graphql-js executes it).
 */
type Prepared = { document: DocumentNode; compiled: CompiledQuery | null } | { errors: readonly GraphQLError[] };

/**
 * Calls a subgraph in the same process: no HTTP hop, but the same contract as over the network. The
 * subgraph gets only the forwarded headers, validates the document against its own schema (its scalars
 * judge the literals the gateway passed on, as a subgraph server would), and its errors travel as
 * serialized JSON, so query plans and results are identical in one-process and distributed mode.
 */
export class InProcessDataSource implements GraphQLDataSource<GatewayContext> {
  private readonly documents = new Map<string, Prepared>();

  constructor(
    private readonly service: string,
    private readonly subgraph: SubgraphInstance,
    private readonly onInternalError: (error: unknown) => void,
  ) {}

  async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    if (!tracingEnabled()) return this.run(options);
    // A span per subgraph execution, as a subgraph server's request span is in distributed mode.
    return tracer().startActiveSpan(
      `subgraph ${this.service}`,
      { attributes: { 'graphql.operation.name': options.request.operationName ?? '' } },
      async (span) => {
        try {
          const response = await this.run(options);
          if (response.errors?.length) span.setAttribute('graphql.errors', response.errors.length);
          return response;
        } finally {
          span.end();
        }
      },
    );
  }

  private async run(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
    const query = options.request.query ?? '';
    const variables = options.request.variables ?? {};
    // Health checks carry no incoming request, so no headers to forward; they act as the system.
    const incoming = 'incomingRequestContext' in options;
    const headers = incoming ? options.context.headers : {};
    const principal = incoming ? options.context.principal : SYSTEM_PRINCIPAL;
    const prepared = this.documents.get(query) ?? (await this.prepare(query));
    if ('errors' in prepared) {
      return { errors: prepared.errors.map((e) => ({ ...e.toJSON(), extensions: { ...e.extensions, code: 'GRAPHQL_VALIDATION_FAILED' } })) };
    }
    let result: ExecutionResult;
    // What the request read and wrote of the state, answered as a subgraph server answers it (`extensions.state`).
    const trace = new StateTrace();
    try {
      const contextValue = this.subgraph.context({ headers, principal });
      const compiled = compiledSubgraphs ? prepared.compiled : null;
      if (compiled) subgraphExecutionCounts.compiled += 1;
      else subgraphExecutionCounts.interpreted += 1;
      result = await traceRequest(trace, async () =>
        compiled
          ? await compiled.query(undefined, contextValue, variables)
          : await execute({
              schema: this.subgraph.schema,
              document: prepared.document,
              variableValues: variables,
              operationName: options.request.operationName ?? null,
              contextValue,
            }),
      );
    } catch (error) {
      // The subgraph could not answer at all: as over the network, its fields fail and the rest stands.
      this.onInternalError(error);
      return { errors: unavailableErrors(this.service, prepared.document, variables) };
    }
    const response: GatewayGraphQLResponse = {};
    if (result.data !== undefined) response.data = result.data;
    // Without data, execution never started: the request itself was bad (variables that do not coerce).
    const requestError = !('data' in result);
    if (result.errors) response.errors = result.errors.map((e) => serializeSubgraphError(e, this.onInternalError, requestError));
    const state = stateExtension(trace);
    if (state) response.extensions = { state };
    return response;
  }

  private async prepare(query: string): Promise<Prepared> {
    const document = parse(query);
    const errors = validate(this.subgraph.schema, document);
    const prepared: Prepared = errors.length > 0 ? { errors } : { document, compiled: await compiledOrNull(this.subgraph.schema, document) };
    if (this.documents.size >= MAX_CACHED_DOCUMENTS) this.documents.delete(this.documents.keys().next().value!);
    this.documents.set(query, prepared);
    return prepared;
  }
}

type GraphQLJit = typeof import('graphql-jit');
let jit: GraphQLJit | null = null;
let jitLoading: Promise<GraphQLJit> | null = null;

/**
 * Loads graphql-jit (once). The server's start does not wait for it: it is loaded right after the port
 * listens (a warm-up task), or by the first document compiled, whichever comes first.
 */
export function loadGraphQLJit(): Promise<GraphQLJit> {
  return (jitLoading ??= import('graphql-jit').then((module) => (jit = module)));
}

/**
 * The document compiled by graphql-jit, or null when it declines (graphql-js then executes it). A subgraph
 * server compiles its callers' documents the same way (gateway/subgraph-host/compiled-executor.ts).
 */
export async function compiledOrNull(schema: GraphQLSchema, document: DocumentNode, operationName?: string): Promise<CompiledQuery | null> {
  const { compileQuery, isCompiledQuery } = jit ?? (await loadGraphQLJit());
  try {
    const compiled = compileQuery(schema, document, operationName);
    return isCompiledQuery(compiled) ? compiled : null;
  } catch {
    return null;
  }
}
