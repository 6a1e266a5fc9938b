import { getOperationAST, GraphQLError, OperationTypeNode, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { GatewayContext } from '../execution/context.js';
import type { UsageRecorder } from '../governance/usage.js';
import { clientMessage } from '../execution/bounded-errors.js';
import { MAX_ERRORS, operationNotFound } from '../execution/graphql-errors.js';
import type { Authorizer } from '../security/authorization.js';
import { operationCost, rateLimitedError, type RateLimiter } from '../security/rate-limit.js';

/*
 * What every streaming transport (graphql-ws, Server-Sent Events, Apollo's multipart subscriptions) checks
 * before an operation runs, after the request limits: valid against the served schema, one operation
 * selected, the same authorization as a query over HTTP, and a subscription charged to the rate limit as it
 * starts. One function, so no transport can skip a rule.
 */

export interface OperationGate {
  /** The schema served now (a reload swaps it). */
  schema: () => GraphQLSchema;
  authorizer: Authorizer;
  rateLimiter: RateLimiter;
  /** Field usage (gateway/governance/usage.ts): subscriptions are counted as they start. */
  usage: UsageRecorder | null;
}

export interface OperationRequest {
  context: GatewayContext;
  /** The document as sent (field usage keys its coordinates by it). */
  text: string;
  document: DocumentNode;
  operationName: string | null | undefined;
  variables: Record<string, unknown> | null | undefined;
}

export type Admission =
  { errors: GraphQLError[] } | { document: DocumentNode; operationName: string | null | undefined; variables: Record<string, unknown>; subscription: boolean };

export function admitOperation(gate: OperationGate, request: OperationRequest): Admission {
  const { document, operationName, variables, context } = request;
  const principal = context.principal;
  const invalid = validate(gate.schema(), document, undefined, { maxErrors: MAX_ERRORS });
  if (invalid.length > 0) return { errors: invalid.map((e) => coded(e, 'GRAPHQL_VALIDATION_FAILED')) };
  const operation = getOperationAST(document, operationName);
  if (!operation) return { errors: [operationNotFound(operationName)] };
  // The same authorization as over HTTP, before the operation is planned or a stream opened.
  const verdict = gate.authorizer.judge(document, operationName, principal, variables ?? undefined);
  if (verdict && 'refused' in verdict) return { errors: [verdict.refused] };
  const subscription = operation.operation === OperationTypeNode.SUBSCRIPTION;
  if (subscription) {
    const decision = gate.rateLimiter.take(principal, operationCost(document, operationName, variables ?? undefined));
    if (!decision.allowed) return { errors: [rateLimitedError(principal, decision)] };
    // Queries and mutations are counted by the operation policies as they run (gateway/execution/operation-policy.ts).
    gate.usage?.record({ ...context.client, principal }, request.text, document, operationName, variables);
  }
  return { document, operationName, variables: variables ?? {}, subscription };
}

function coded(error: unknown, code: string): GraphQLError {
  if (error instanceof GraphQLError) {
    return new GraphQLError(clientMessage(error.message, error), {
      nodes: error.nodes,
      source: error.source,
      positions: error.positions,
      extensions: { ...error.extensions, code },
    });
  }
  return new GraphQLError(clientMessage(String(error), error), { extensions: { code } });
}
