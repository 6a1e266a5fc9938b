import { OperationTypeNode, valueFromASTUntyped, type FieldNode, type GraphQLFormattedError } from 'graphql';
import type { OperationPolicy } from '../pipeline/operation-policy.js';
import { OperationTooLargeError, rootFields } from './operation-fields.js';

/**
 * One line per attempted state change: who (principal and tenant), what (the mutation field), on what
 * (the target id), how it ended (`ok` or the error code), and the request id that ties it to the other
 * log lines. Refused attempts (403, 404, 409...) are recorded as well as successes. Never variables,
 * answers, credentials or key material: only ids.
 */
export interface AuditEntry {
  principal: string;
  tenant: string;
  operation: string;
  target: string | null;
  outcome: string;
  requestId: string | null;
}

export type AuditSink = (entry: AuditEntry) => void;

/** Argument names that name the thing a mutation changes, in the order they are looked for. */
const TARGET_ARGUMENTS = ['id', 'bookingId', 'sessionId', 'quoteId', 'runId'];

function argumentTarget(field: FieldNode, variables: Record<string, unknown>): string | null {
  const args = Object.fromEntries((field.arguments ?? []).map((a) => [a.name.value, valueFromASTUntyped(a.value, variables)]));
  for (const source of [args, typeof args['input'] === 'object' && args['input'] !== null ? (args['input'] as Record<string, unknown>) : {}]) {
    for (const name of TARGET_ARGUMENTS) if (typeof source[name] === 'string') return source[name];
  }
  return null;
}

const responseTarget = (data: Record<string, unknown> | null | undefined, key: string): string | null => {
  const value = data?.[key];
  if (value && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const name of ['id', 'runId', 'sessionId', 'materializationId']) if (typeof record[name] === 'string') return record[name];
  }
  return null;
};

function outcomeAt(errors: readonly GraphQLFormattedError[] | undefined, key: string): string {
  const own = errors?.find((e) => e.path === undefined || e.path[0] === key);
  if (!own) return 'ok';
  const code = own.extensions?.['code'];
  return typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR';
}

export function auditPolicy(sink: AuditSink): OperationPolicy {
  return {
    answered({ data, errors }, resolved) {
      if (!resolved || resolved.operation?.operation !== OperationTypeNode.MUTATION) return;
      const { document, operation, context } = resolved;
      const variables = (resolved.variables ?? {}) as Record<string, unknown>;
      // Every mutation field that ran, however it was selected (fragments followed, conditions resolved). A
      // document too large to judge was refused whole: one line records the attempt.
      let fields: FieldNode[];
      try {
        fields = rootFields(document, operation, variables);
      } catch (error) {
        if (!(error instanceof OperationTooLargeError)) throw error;
        sink({
          principal: context.principal.id,
          tenant: context.principal.tenant,
          operation: operation.name?.value ?? '(anonymous mutation)',
          target: null,
          outcome: outcomeAt(errors, ''),
          requestId: context.headers['x-request-id'] ?? null,
        });
        return;
      }
      for (const selection of fields) {
        const key = selection.alias?.value ?? selection.name.value;
        sink({
          principal: context.principal.id,
          tenant: context.principal.tenant,
          operation: selection.name.value,
          target: argumentTarget(selection, variables) ?? responseTarget(data, key),
          outcome: outcomeAt(errors, key),
          requestId: context.headers['x-request-id'] ?? null,
        });
      }
    },
  };
}
