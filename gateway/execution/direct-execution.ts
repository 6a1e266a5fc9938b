import { createHash } from 'node:crypto';
import type { GatewayExecutor, GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import {
  getOperationAST,
  GraphQLError,
  Kind,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLFormattedError,
  type GraphQLSchema,
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
 * The execution of a REST route's operation without Apollo Server's per-request pipeline. A route runs one
 * fixed operation, so what Apollo Server does for every request (hash the text, look up the parse, build a
 * request context, dispatch ten plugins' hooks, negotiate a media type) is settled once per operation and
 * schema here; what depends on the request runs as it does for GraphQL clients: the same policies in the
 * same order (gateway/execution/operation-policy.ts), the same gateway executor (authorization's filtering,
 * the query planner, the plan executor, the data sources), the same error formatting.
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
  /** Apollo Server's `formatError` (gateway/execution/graphql-errors.ts). */
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
}

/** Operations prepared per schema: the route tables are bounded, this only guards against a caller that is not. */
const MAX_PREPARED = 1_000;

const NO_CACHE: GatewayGraphQLRequestContext['cache'] = {
  get: async () => undefined,
  set: async () => {},
  delete: async () => {},
};

export type DirectExecution = (source: string, variables: Record<string, unknown>, context: GatewayContext) => Promise<OperationAnswer>;

export function createDirectExecution(options: DirectExecutionOptions): DirectExecution {
  const { policies } = options;
  const prepared = new WeakMap<GraphQLSchema, Map<string, Prepared>>();

  const prepare = (schema: GraphQLSchema, source: string): Prepared | { syntax: GraphQLError } => {
    let bySource = prepared.get(schema);
    if (!bySource) prepared.set(schema, (bySource = new Map<string, Prepared>()));
    const known = bySource.get(source);
    if (known) return known;
    let document: DocumentNode;
    try {
      document = parse(source, { maxTokens: options.maxTokens });
    } catch (error) {
      return { syntax: error instanceof GraphQLError ? error : new GraphQLError(String(error)) };
    }
    const errors = validate(schema, document, specifiedRules);
    const made: Prepared = {
      document,
      queryHash: createHash('sha256').update(source).digest('hex'),
      invalid: errors.length > 0 ? errors.map((e) => withCode(e, 'GRAPHQL_VALIDATION_FAILED')) : null,
    };
    if (bySource.size >= MAX_PREPARED) bySource.clear();
    bySource.set(source, made);
    return made;
  };

  const format = (errors: readonly GraphQLError[]) => formatErrors(errors, options.formatError);
  /** The answer of a request refused or failed before (or instead of) its execution. */
  const failed = (errors: readonly GraphQLError[], operation: ResolvedOperation | undefined, headers: AnswerHeaders): OperationAnswer => {
    const answer: OperationAnswer = { errors: format(errors), headers };
    answerPolicies(policies, answer, operation);
    return answer;
  };

  return async (source, variables, context) => {
    await startPolicies(policies);
    const headers = new Map<string, string>();
    const served = options.served();
    if (!served) throw new Error('the gateway has not loaded its supergraph yet');
    const { schema, executor } = served;
    const ready = prepare(schema, source);
    if ('syntax' in ready) return failed([withCode(ready.syntax, 'GRAPHQL_PARSE_FAILED')], undefined, headers);
    if (ready.invalid) return failed(ready.invalid, undefined, headers);
    const { document, queryHash } = ready;
    const operation = getOperationAST(document) ?? undefined;
    const resolved: ResolvedOperation = { schema, document, operation, operationName: undefined, source, variables, context };
    try {
      resolvePolicies(policies, resolved, headers);
    } catch (error) {
      return failed([asGraphQLError(error)], resolved, headers);
    }
    const instead = answerInstead(policies, resolved);
    if (instead) {
      const answer: OperationAnswer = { errors: instead.errors, status: instead.status, headers };
      answerPolicies(policies, answer, resolved);
      return answer;
    }
    const requestContext: GatewayGraphQLRequestContext = {
      request: { query: source, variables },
      logger: options.logger,
      schema,
      schemaHash: 'unused' as GatewayGraphQLRequestContext['schemaHash'],
      context,
      cache: NO_CACHE,
      queryHash,
      document,
      source,
      operationName: operation?.name?.value ?? null,
      operation: operation!,
      metrics: {},
      overallCachePolicy: undefined,
    };
    let answer: OperationAnswer;
    try {
      const result = await executor(requestContext);
      const errors = result.errors?.map((e) => (isVariableCoercion(e) ? withCode(e, 'BAD_USER_INPUT') : e));
      answer = { ...(result.data !== undefined ? { data: result.data } : {}), ...(errors ? { errors: format(errors) } : {}), headers };
    } catch (error) {
      return failed([asGraphQLError(error)], resolved, headers);
    }
    answerPolicies(policies, answer, resolved);
    return answer;
  };
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
