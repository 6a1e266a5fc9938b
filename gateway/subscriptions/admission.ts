import { GraphQLError, OperationTypeNode, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { GatewayContext } from '../pipeline/context.js';
import { clientMessage } from '../pipeline/bounded-errors.js';
import { MAX_ERRORS } from '../pipeline/graphql-errors.js';
import { answerPolicies, resolvePolicies } from '../pipeline/operation-policy.js';
import type { Pipeline } from '../pipeline/pipeline.js';

/*
 * What every streaming transport (graphql-ws, Server-Sent Events, Apollo's multipart subscriptions) does
 * with an operation its door took in (document resolution and the limits, gateway/pipeline/pipeline.ts):
 * the pipeline's validation against the served schema, then, for a subscription, the pipeline's checks
 * (authorization, the rate charge of its full cost, usage) as it starts. A query or mutation on a stream
 * is judged by authorization first (a refusal answers before the stream starts) and runs every check in
 * its execution (Apollo Server's plugin), once. One function, so no transport can skip a step.
 */

export interface OperationGate {
  /** The schema served now (a reload swaps it). */
  schema: () => GraphQLSchema;
  pipeline: Pipeline;
}

export interface OperationRequest {
  /** The operation's context: its `intake` is what its door took in. */
  context: GatewayContext;
  operationName: string | null | undefined;
  variables: Record<string, unknown> | null | undefined;
  /** Receives the rate charge's `RateLimit-*` headers (an HTTP stream sends them). */
  headers?: { set(name: string, value: string): void };
}

export type Admission =
  | { errors: GraphQLError[] }
  | { document: DocumentNode; text: string; operationName: string | null | undefined; variables: Record<string, unknown>; subscription: boolean };

export function admitOperation(gate: OperationGate, request: OperationRequest): Admission {
  const { operationName, variables, context } = request;
  const intake = context.intake;
  if (!intake) throw new Error('an operation reached a stream without passing its door (gateway/pipeline/pipeline.ts)');
  const schema = gate.schema();
  const validated = gate.pipeline.validate(schema, intake.document, operationName);
  if ('errors' in validated) return { errors: validated.errors.slice(0, MAX_ERRORS).map((e) => coded(e, 'GRAPHQL_VALIDATION_FAILED')) };
  const { operation } = validated;
  const subscription = operation.operation === OperationTypeNode.SUBSCRIPTION;
  const resolved = { schema, document: intake.document, operation, operationName, source: intake.source, variables: variables ?? undefined, context };
  // A subscription passes every check as it starts. A query or mutation is judged by authorization here, so
  // a refusal is the stream's status rather than an event; its execution runs every check (once) as it runs.
  const policies = subscription ? gate.pipeline.checks : [gate.pipeline.authorization];
  const headers = request.headers ?? { set: () => undefined };
  try {
    resolvePolicies(policies, resolved, headers);
  } catch (error) {
    const errors = [error instanceof GraphQLError ? error : new GraphQLError(String(error), { extensions: { code: 'INTERNAL_SERVER_ERROR' } })];
    // A refused attempt is answered, and the audit trail records a refused mutation as any other door does.
    answerPolicies(gate.pipeline.checks, { errors: errors.map((e) => e.toJSON()), headers }, resolved);
    return { errors };
  }
  return { document: intake.document, text: intake.source, operationName, variables: variables ?? {}, subscription };
}

function coded(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions['code'] !== undefined) return error;
  return new GraphQLError(clientMessage(error.message, error), {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    extensions: { ...error.extensions, code },
  });
}
