import { createHash } from 'node:crypto';
import type { GatewayExecutor, GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import {
  BREAK,
  getOperationAST,
  GraphQLError,
  Kind,
  OperationTypeNode,
  parse,
  specifiedRules,
  validate,
  visit,
  type DocumentNode,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import type { GatewayContext } from './context.js';
import { formatErrors } from './graphql-errors.js';
import {
  answerInstead,
  answerPolicies,
  resolvePolicies,
  startPolicies,
  type AnswerHeaders,
  type OperationAnswer,
  type OperationPolicy,
  type ResolvedOperation,
} from './operation-policy.js';

/*
 * The execution of an operation without Apollo Server's per-request pipeline: a REST route's fixed
 * operation, and the queries and mutations GraphQL clients send as JSON over POST. What Apollo Server does
 * for every request (hash the text, look up the parse, build a request context, dispatch its plugins'
 * hooks) is settled once per document and schema here; what depends on the request runs as it does in
 * Apollo Server: the same policies in the same order (gateway/pipeline/operation-policy.ts), the same
 * gateway executor (authorization's filtering, the query planner, the plan executor, the data sources),
 * the same error formatting, and for GraphQL over HTTP the same status, headers and body (Apollo Server's
 * status rules, its cache-control header, its JSON). A request this path does not take is answered by
 * Apollo Server: a document that does not parse or validate, an operationName that selects nothing, a
 * subscription, `@defer`, introspection.
 */

/** What the gateway's executor needs, as Apollo Server was given it: the served schema and the executor. */
export interface ServedExecution {
  schema: GraphQLSchema;
  executor: GatewayExecutor;
}

export interface DirectExecutionOptions {
  /** The same list Apollo Server's `policyPlugin` runs. */
  policies: readonly OperationPolicy[];
  /** The schema and executor being served now (a supergraph update swaps them). */
  served: () => ServedExecution | null;
  /** Apollo Server's `formatError` (gateway/pipeline/graphql-errors.ts). */
  formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  /** The same bound as Apollo Server's parse (GRAPHQL_MAX_TOKENS). */
  maxTokens: number;
  logger: GatewayGraphQLRequestContext['logger'];
}

interface Prepared {
  document: DocumentNode;
  queryHash: string;
  /** Validation errors against the schema (a route whose operation the schema no longer serves). */
  invalid: readonly GraphQLError[] | null;
  /** Whether GraphQL over HTTP may run it here: no `@defer`, no introspection (Apollo Server answers those). */
  plain: boolean;
}

/** Operations prepared per schema: the route tables are bounded, this only guards against a caller that is not. */
const MAX_PREPARED = 1_000;

const NO_CACHE: GatewayGraphQLRequestContext['cache'] = {
  get: async () => undefined,
  set: async () => {},
  delete: async () => {},
};

/** How a prepared operation ended before its answer is made (see `run`). */
type Outcome =
  | { kind: 'stopped'; errors: readonly GraphQLError[] }
  | { kind: 'instead'; status: number; errors: GraphQLFormattedError[] }
  | {
      kind: 'ran';
      data: Record<string, unknown> | null | undefined;
      errors: readonly GraphQLError[] | undefined;
      extensions: Record<string, unknown> | undefined;
    };

/** GraphQL-over-HTTP requests run here (for tests: which door a request took). */
export const directCounts = { http: 0 };

/** A GraphQL-over-HTTP request this path takes: its document prepared and its operation selected. */
interface AcceptedRequest {
  readonly served: ServedExecution;
  readonly source: string;
  readonly prepared: Prepared;
  readonly operation: OperationDefinitionNode;
  readonly operationName: string | null;
}

/** A GraphQL-over-HTTP answer as Apollo Server would send it. */
interface HttpAnswer {
  status: number;
  headers: Map<string, string>;
  /** Apollo Server's JSON: `errors`, `data`, `extensions` in that order, and a newline. */
  body: string;
}

export interface DirectExecution {
  /** Runs a REST route's operation (a document with one operation). */
  operation(source: string, variables: Record<string, unknown>, context: GatewayContext): Promise<OperationAnswer>;
  /**
   * Whether a GraphQL-over-HTTP request is one this path runs (a query or mutation whose document parses,
   * validates and selects an operation, with no `@defer` and no introspection); null: Apollo Server's.
   * Nothing runs and nothing is charged until `http`.
   */
  accept(source: string, operationName: string | null): AcceptedRequest | null;
  /** Runs an accepted request; `contentType` is the media type negotiated for the answer. */
  http(request: AcceptedRequest, variables: Record<string, unknown> | null, context: GatewayContext, contentType: string): Promise<HttpAnswer>;
}

export function createDirectExecution(options: DirectExecutionOptions): DirectExecution {
  return new DirectExecutor(options);
}

/**
 * The direct execution of a schema being served. Documents are prepared once per schema and source text
 * (`prepare`); both doors, a REST route's `operation` and GraphQL over HTTP's `accept` and `http`, then run
 * them through `run` and answer its outcome their own way.
 */
class DirectExecutor implements DirectExecution {
  private readonly policies: readonly OperationPolicy[];
  /** Per schema, the documents prepared by their source text (a supergraph update starts a new map). */
  private readonly prepared = new WeakMap<GraphQLSchema, Map<string, Prepared>>();

  constructor(private readonly options: DirectExecutionOptions) {
    this.policies = options.policies;
  }

  async operation(source: string, variables: Record<string, unknown>, context: GatewayContext): Promise<OperationAnswer> {
    await startPolicies(this.policies);
    const headers = new Map<string, string>();
    const served = this.options.served();
    if (!served) throw new Error('the gateway has not loaded its supergraph yet');
    const ready = this.prepare(served.schema, source);
    if ('syntax' in ready) return this.failed([withCode(ready.syntax, 'GRAPHQL_PARSE_FAILED')], undefined, headers);
    if (ready.invalid) return this.failed(ready.invalid, undefined, headers);
    const { document } = ready;
    const operation = getOperationAST(document) ?? undefined;
    const resolved: ResolvedOperation = { schema: served.schema, document, operation, operationName: undefined, source, variables, context };
    const outcome = await this.run(served, ready, resolved, headers, undefined);
    if (outcome.kind === 'stopped') return this.failed(outcome.errors, resolved, headers);
    const answer: OperationAnswer =
      outcome.kind === 'instead'
        ? { errors: outcome.errors, status: outcome.status, headers }
        : {
            ...(outcome.data !== undefined ? { data: outcome.data } : {}),
            ...(outcome.errors ? { errors: this.format(outcome.errors) } : {}),
            headers,
          };
    answerPolicies(this.policies, answer, resolved);
    return answer;
  }

  accept(source: string, operationName: string | null): AcceptedRequest | null {
    const served = this.options.served();
    if (!served) return null;
    const ready = this.prepare(served.schema, source);
    if ('syntax' in ready || ready.invalid || !ready.plain) return null;
    const operation = getOperationAST(ready.document, operationName);
    if (!operation || operation.operation === OperationTypeNode.SUBSCRIPTION) return null;
    return { served, source, prepared: ready, operation, operationName };
  }

  async http(request: AcceptedRequest, variables: Record<string, unknown> | null, context: GatewayContext, contentType: string): Promise<HttpAnswer> {
    directCounts.http += 1;
    await startPolicies(this.policies);
    const { served, source, prepared, operation, operationName } = request;
    const headers = new Map<string, string>();
    const resolved: ResolvedOperation = {
      schema: served.schema,
      document: prepared.document,
      operation,
      operationName,
      source,
      variables: variables ?? undefined,
      context,
    };
    const cachePolicy = new CachePolicy();
    const outcome = await this.run(served, prepared, resolved, headers, cachePolicy);
    const answer = this.httpAnswerOf(outcome, headers);
    answerPolicies(this.policies, answer, resolved);
    const extensions =
      outcome.kind === 'ran' || answer.extensions ? { ...(outcome.kind === 'ran' ? outcome.extensions : {}), ...answer.extensions } : undefined;
    return written(answer, headers, extensions && Object.keys(extensions).length > 0 ? extensions : undefined, contentType, cachePolicy);
  }

  /** The document of `source` parsed and validated against `schema`, or its syntax error; kept per schema. */
  private prepare(schema: GraphQLSchema, source: string): Prepared | { syntax: GraphQLError } {
    let bySource = this.prepared.get(schema);
    if (!bySource) this.prepared.set(schema, (bySource = new Map<string, Prepared>()));
    const known = bySource.get(source);
    if (known) return known;
    let document: DocumentNode;
    try {
      document = parse(source, { maxTokens: this.options.maxTokens });
    } catch (error) {
      return { syntax: error instanceof GraphQLError ? error : new GraphQLError(String(error)) };
    }
    const errors = validate(schema, document, specifiedRules);
    const made: Prepared = {
      document,
      queryHash: createHash('sha256').update(source).digest('hex'),
      invalid: errors.length > 0 ? errors.map((e) => withCode(e, 'GRAPHQL_VALIDATION_FAILED')) : null,
      plain: isPlain(document),
    };
    if (bySource.size >= MAX_PREPARED) bySource.clear();
    bySource.set(source, made);
    return made;
  }

  private format(errors: readonly GraphQLError[]): GraphQLFormattedError[] {
    return formatErrors(errors, this.options.formatError);
  }

  /** The answer of a request refused or failed before (or instead of) its execution. */
  private failed(errors: readonly GraphQLError[], operation: ResolvedOperation | undefined, headers: AnswerHeaders): OperationAnswer {
    const answer: OperationAnswer = { errors: this.format(errors), headers };
    answerPolicies(this.policies, answer, operation);
    return answer;
  }

  /**
   * What follows the document's preparation on both paths: the policies asked about the resolved operation,
   * an answer given instead, or the executor run (variables that do not coerce coded BAD_USER_INPUT, as
   * Apollo Server codes them). Errors are still unformatted: each path answers them its own way.
   */
  private async run(
    served: ServedExecution,
    ready: Prepared,
    resolved: ResolvedOperation,
    headers: AnswerHeaders,
    cachePolicy: CachePolicy | undefined,
  ): Promise<Outcome> {
    try {
      resolvePolicies(this.policies, resolved, headers);
    } catch (error) {
      return { kind: 'stopped', errors: [asGraphQLError(error)] };
    }
    const instead = answerInstead(this.policies, resolved);
    if (instead) return { kind: 'instead', ...instead };
    const { source, operation, operationName, variables, context } = resolved;
    const requestContext = this.requestContextOf(served, source, ready, operation, operationName ?? null, variables, context, cachePolicy);
    try {
      const result = await served.executor(requestContext);
      const errors = result.errors?.map((e) => (isVariableCoercion(e) ? withCode(e, 'BAD_USER_INPUT') : e));
      return { kind: 'ran', data: result.data, errors, extensions: result.extensions };
    } catch (error) {
      return { kind: 'stopped', errors: [asGraphQLError(error)] };
    }
  }

  /** The request context the gateway's executor reads, as Apollo Server would have built it. */
  private requestContextOf(
    served: ServedExecution,
    source: string,
    ready: Prepared,
    operation: OperationDefinitionNode | undefined,
    operationName: string | null,
    variables: Record<string, unknown> | undefined,
    context: GatewayContext,
    overallCachePolicy: CachePolicy | undefined,
  ): GatewayGraphQLRequestContext {
    return {
      request: { query: source, variables, ...(operationName !== null ? { operationName } : {}) },
      logger: this.options.logger,
      schema: served.schema,
      schemaHash: 'unused' as GatewayGraphQLRequestContext['schemaHash'],
      context,
      cache: NO_CACHE,
      queryHash: ready.queryHash,
      document: ready.document,
      source,
      operationName: operation?.name?.value ?? null,
      operation: operation!,
      metrics: {},
      overallCachePolicy,
    };
  }

  /** A GraphQL-over-HTTP request's answer to its outcome, with Apollo Server's status; the policies have their say after. */
  private httpAnswerOf(outcome: Outcome, headers: Map<string, string>): OperationAnswer {
    if (outcome.kind === 'stopped') {
      // Apollo Server's answer to errors that stop the request: their `extensions.http` set the status and
      // headers, 500 otherwise.
      const http = httpOfErrors(outcome.errors, headers);
      return { errors: this.format(outcome.errors), status: http.status ?? 500, headers };
    }
    if (outcome.kind === 'instead') return { errors: outcome.errors, status: outcome.status, headers };
    const { data, errors } = outcome;
    const http = errors ? httpOfErrors(errors, headers) : {};
    // A request whose variables did not coerce ran nothing: 400 (Apollo Server's
    // status400ForVariableCoercionErrors, on by default).
    const status = http.status ?? (errors?.length && data === undefined ? 400 : undefined);
    return {
      ...(data !== undefined ? { data } : {}),
      ...(errors ? { errors: this.format(errors) } : {}),
      ...(status !== undefined ? { status } : {}),
      headers,
    };
  }
}

/**
 * Apollo Server's `extensions.http` of errors (`normalizeAndFormatErrors`): the last status given wins and
 * headers are set on the answer's.
 */
function httpOfErrors(errors: readonly GraphQLError[], headers: Map<string, string>): { status?: number } {
  let status: number | undefined;
  for (const error of errors) {
    const http = error.extensions['http'] as { status?: unknown; headers?: unknown } | undefined;
    if (typeof http !== 'object' || http === null) continue;
    if (typeof http.status === 'number') status = http.status;
    if (http.headers instanceof Map) for (const [name, value] of http.headers as Map<string, string>) headers.set(name.toLowerCase(), value);
  }
  return status !== undefined ? { status } : {};
}

/**
 * The answer as Apollo Server writes it: its media type, the cache-control header its cache-control plugin
 * sets (`max-age=N, public|private` for a whole answer the subgraphs allowed to be kept, `no-store`
 * otherwise), and `errors`, `data`, `extensions` in that order, with a newline.
 */
function written(
  answer: OperationAnswer,
  headers: Map<string, string>,
  extensions: Record<string, unknown> | undefined,
  contentType: string,
  cachePolicy: CachePolicy,
): HttpAnswer {
  headers.set('content-type', contentType);
  const cacheable = !answer.errors ? cachePolicy.policyIfCacheable() : null;
  headers.set('cache-control', cacheable ? `max-age=${cacheable.maxAge}, ${cacheable.scope.toLowerCase()}` : 'no-store');
  const body = JSON.stringify({ errors: answer.errors, data: answer.data, extensions }) + '\n';
  return { status: answer.status ?? 200, headers, body };
}

type CacheScope = 'PUBLIC' | 'PRIVATE';

/**
 * Apollo Server's cache policy of an operation (`newCachePolicy`): the subgraphs' Cache-Control headers
 * restrict it (gateway/sources/remote-data-source.ts); kept only when it ends with a positive max-age.
 */
class CachePolicy {
  maxAge: number | undefined = undefined;
  scope: CacheScope | undefined = undefined;

  restrict(hint: { maxAge?: number; scope?: CacheScope }): void {
    if (hint.maxAge !== undefined && (this.maxAge === undefined || hint.maxAge < this.maxAge)) this.maxAge = hint.maxAge;
    if (hint.scope !== undefined && this.scope !== 'PRIVATE') this.scope = hint.scope;
  }

  replace(hint: { maxAge?: number; scope?: CacheScope }): void {
    if (hint.maxAge !== undefined) this.maxAge = hint.maxAge;
    if (hint.scope !== undefined) this.scope = hint.scope;
  }

  policyIfCacheable(): { maxAge: number; scope: CacheScope } | null {
    if (this.maxAge === undefined || this.maxAge === 0) return null;
    return { maxAge: this.maxAge, scope: this.scope ?? 'PUBLIC' };
  }
}

/** Whether a document uses no `@defer` and no introspection field (those are Apollo Server's to run). */
function isPlain(document: DocumentNode): boolean {
  let plain = true;
  visit(document, {
    Directive(node) {
      if (node.name.value === 'defer') {
        plain = false;
        return BREAK;
      }
      return undefined;
    },
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type') {
        plain = false;
        return BREAK;
      }
      return undefined;
    },
  });
  return plain;
}

/** An error thrown by a policy or the executor, as Apollo Server takes it (`ensureGraphQLError`). */
function asGraphQLError(error: unknown): GraphQLError {
  if (error instanceof GraphQLError) return error;
  if (error instanceof Error) return new GraphQLError(error.message, { originalError: error });
  return new GraphQLError(`Unexpected error value: ${String(error)}`);
}

/** `error` with a code, unless it has one (as Apollo Server marks parse, validation and input errors). */
function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions['code'] !== undefined) return error;
  return new GraphQLError(error.message, {
    ...(error.nodes ? { nodes: error.nodes } : {}),
    ...(error.source ? { source: error.source } : {}),
    ...(error.positions ? { positions: error.positions } : {}),
    ...(error.path ? { path: error.path } : {}),
    originalError: error.originalError ?? error,
    extensions: { ...error.extensions, code },
  });
}

/** A variable that could not be coerced, as graphql-js words it (Apollo Server answers these BAD_USER_INPUT). */
function isVariableCoercion(error: GraphQLError): boolean {
  const node = error.nodes?.length === 1 ? error.nodes[0] : undefined;
  if (node?.kind !== Kind.VARIABLE_DEFINITION || error.extensions['code'] != null) return false;
  const name = `Variable "$${node.variable.name.value}" `;
  return ['has invalid value', 'got invalid value ', 'of required type ', 'of non-null type '].some((rest) => error.message.startsWith(name + rest));
}
