import type { ApolloServerPlugin, GraphQLRequestContext, GraphQLRequestListener, GraphQLResponse } from '@apollo/server';
import { HeaderMap } from '@apollo/server';
import type { DocumentNode, GraphQLFormattedError, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import type { GatewayContext } from './context.js';

/*
 * What the gateway does around every operation it runs, whichever door it came in by: a turn of the event
 * loop, the refusals of a request (a subscription over HTTP, authorization), the rate limit's charge, field
 * usage, bounded variable errors, the answer's status and the audit trail. Each is an `OperationPolicy`;
 * one ordered list of them is made per server (gateway/graphql/apollo.ts) and run by both executions of an
 * operation: Apollo Server's pipeline, through the single plugin `policyPlugin` (GraphQL over HTTP and
 * WebSocket), and the direct execution of REST routes (gateway/pipeline/direct-execution.ts). A policy
 * added to the list holds on every door without being wired to each.
 */

/** An operation whose document is parsed and validated against the served schema. */
export interface ResolvedOperation {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  /** The operation the request selects; undefined when its operationName selects none. */
  readonly operation: OperationDefinitionNode | undefined;
  /** The operation name as the request gave it. */
  readonly operationName: string | null | undefined;
  /** The document's text. */
  readonly source: string;
  /** The variables as the request gave them (the same object the gateway's executor receives). */
  readonly variables: Readonly<Record<string, unknown>> | undefined;
  readonly context: GatewayContext;
}

/** Headers of the answer being made (the rate limit's `RateLimit-*`). */
export interface AnswerHeaders {
  set(name: string, value: string): void;
}

/** An answer as it leaves: errors already formatted. A policy may bound the errors and set the status. */
export interface OperationAnswer {
  data?: Record<string, unknown> | null;
  errors?: readonly GraphQLFormattedError[];
  /** The HTTP status of a GraphQL-over-HTTP answer; unset: 200 (REST maps errors to a status of its own). */
  status?: number;
  readonly headers: AnswerHeaders;
  /** Entries a policy adds to the answer's `extensions` (GraphQL answers; a REST body has none). */
  extensions?: Record<string, unknown>;
}

export interface OperationPolicy {
  /** Before the document is read; the operation starts when every policy's promise has settled. */
  readonly started?: () => Promise<void> | undefined;
  /**
   * Once the operation is resolved, before anything runs. Throws a GraphQLError to refuse the request;
   * every policy is still asked (as Apollo Server asks every plugin), and the first refusal is the answer.
   */
  readonly resolved?: (operation: ResolvedOperation, headers: AnswerHeaders) => void;
  /** Before execution: an answer that replaces it (the first policy to give one wins). */
  readonly answerInstead?: (operation: ResolvedOperation) => { status: number; errors: GraphQLFormattedError[] } | null;
  /** The answer about to leave; `operation` is absent when the document could not be read. */
  readonly answered?: (answer: OperationAnswer, operation: ResolvedOperation | undefined) => void;
}

/** Runs every policy's `started`: one settled promise when none waits. */
export function startPolicies(policies: readonly OperationPolicy[]): Promise<void> | undefined {
  let waits: Promise<void>[] | undefined;
  for (const policy of policies) {
    const wait = policy.started?.();
    if (wait) (waits ??= []).push(wait);
  }
  if (!waits) return undefined;
  return waits.length === 1 ? waits[0] : Promise.all(waits).then(() => undefined);
}

/** Asks every policy about the resolved operation; throws the first refusal after all were asked. */
export function resolvePolicies(policies: readonly OperationPolicy[], operation: ResolvedOperation, headers: AnswerHeaders): void {
  let refusal: { error: unknown } | undefined;
  for (const policy of policies) {
    if (!policy.resolved) continue;
    try {
      policy.resolved(operation, headers);
    } catch (error) {
      refusal ??= { error };
    }
  }
  if (refusal) throw refusal.error;
}

/** The first answer a policy gives instead of executing, or null. */
export function answerInstead(policies: readonly OperationPolicy[], operation: ResolvedOperation): { status: number; errors: GraphQLFormattedError[] } | null {
  for (const policy of policies) {
    const answer = policy.answerInstead?.(operation);
    if (answer) return answer;
  }
  return null;
}

/** Lets every policy see (and bound) the answer about to leave. */
export function answerPolicies(policies: readonly OperationPolicy[], answer: OperationAnswer, operation: ResolvedOperation | undefined): void {
  for (const policy of policies) policy.answered?.(answer, operation);
}

type Context = GraphQLRequestContext<GatewayContext>;

/** The operation of an Apollo Server request, once its document is known. */
function resolvedOf(request: Context): ResolvedOperation | undefined {
  if (!request.document || !request.schema) return undefined;
  return {
    schema: request.schema,
    document: request.document,
    operation: request.operation,
    operationName: request.request.operationName,
    source: request.source ?? '',
    variables: request.request.variables,
    context: request.contextValue,
  };
}

/** The policies as one Apollo Server plugin: GraphQL over HTTP and queries on a socket run them here. */
export function policyPlugin(policies: readonly OperationPolicy[]): ApolloServerPlugin<GatewayContext> {
  return {
    async requestDidStart() {
      await startPolicies(policies);
      let resolved: ResolvedOperation | undefined;
      const operationOf = (request: Context) => (resolved ??= resolvedOf(request));
      const listener: GraphQLRequestListener<GatewayContext> = {
        async didResolveOperation(request) {
          resolvePolicies(policies, operationOf(request)!, request.response.http.headers);
        },
        async responseForOperation(request): Promise<GraphQLResponse | null> {
          const answer = answerInstead(policies, operationOf(request)!);
          if (!answer) return null;
          return { http: { status: answer.status, headers: new HeaderMap() }, body: { kind: 'single', singleResult: { errors: answer.errors } } };
        },
        async willSendResponse(request) {
          const { response } = request;
          if (response.body.kind !== 'single') return;
          const result = response.body.singleResult;
          const answer: OperationAnswer = {
            ...(result.data !== undefined ? { data: result.data } : {}),
            ...(result.errors ? { errors: result.errors } : {}),
            ...(response.http.status !== undefined ? { status: response.http.status } : {}),
            headers: response.http.headers,
          };
          answerPolicies(policies, answer, operationOf(request));
          if (answer.errors !== result.errors) result.errors = answer.errors;
          if (answer.extensions) result.extensions = { ...result.extensions, ...answer.extensions };
          if (answer.status !== undefined) response.http.status = answer.status;
        },
      };
      return listener;
    },
  };
}
