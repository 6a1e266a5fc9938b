import { OperationTypeNode, GraphQLError, type GraphQLFormattedError } from 'graphql';
import { isDatabaseUnavailable, OUTAGE_RETRY_AFTER_SECONDS } from '../../platform/db-errors.js';
import { isErrorCode, statusOf, type ErrorCode } from '../../platform/errors.js';
import { MAX_FIELD_PROBLEMS } from '../../platform/validate.js';
import { clientMessage } from './bounded-errors.js';
import type { OperationPolicy } from './operation-policy.js';

/**
 * Codes the GraphQL libraries put on errors that are the client's doing, as catalogue codes. Anything
 * else without a catalogued code is a fault of ours.
 */
const CLIENT_ERROR_CODES: Readonly<Record<string, ErrorCode>> = {
  // @apollo/gateway: the operation cannot be run as written (e.g. a Float literal beyond the double range).
  INVALID_GRAPHQL: 'GRAPHQL_VALIDATION_FAILED',
  // @apollo/server: operationName names no operation of the document.
  OPERATION_RESOLUTION_FAILURE: 'BAD_REQUEST',
  // @apollo/server's own persisted queries are off: the gateway resolves hashes and ids before Apollo sees
  // the request (gateway/graphql/documents.ts), so this is only reached by a path that bypasses that.
  PERSISTED_QUERY_NOT_SUPPORTED: 'PERSISTED_QUERY_NOT_SUPPORTED',
};

const MESSAGES: Partial<Record<ErrorCode, string>> = {
  PERSISTED_QUERY_NOT_SUPPORTED: 'Persisted queries are not supported: send the query text',
};

interface Logger {
  error(details: object, message: string): void;
}

/**
 * Apollo Server's `formatError`: every error leaves with a catalogue code. Client errors keep their
 * message; faults of ours are logged and shown only as "Internal server error".
 */
export function formatGraphQLError(formatted: GraphQLFormattedError, error: unknown, log: Logger): GraphQLFormattedError {
  const raw = formatted.extensions?.['code'];
  const code = catalogued(raw, error);
  if (code && code !== 'INTERNAL_SERVER_ERROR') {
    const message = clientMessage(MESSAGES[code] ?? formatted.message, error);
    if (code === raw && message === formatted.message) return formatted;
    return { ...formatted, message, extensions: { ...formatted.extensions, code } };
  }
  if (raw !== 'INTERNAL_SERVER_ERROR') log.error({ err: error }, 'unexpected GraphQL error');
  return {
    message: 'Internal server error',
    ...(formatted.path ? { path: formatted.path } : {}),
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
  };
}

function catalogued(code: unknown, error: unknown): ErrorCode | null {
  if (isDatabaseUnavailable(error)) return 'SERVICE_UNAVAILABLE';
  // Apollo answers a mutation over GET (405) and an Accept header it cannot satisfy (406) with
  // BAD_REQUEST and that status; the catalogue has a code for each.
  if (code === 'BAD_REQUEST' && error instanceof GraphQLError) {
    const status = (error.extensions['http'] as { status?: number } | undefined)?.status;
    if (status === 405) return 'METHOD_NOT_ALLOWED';
    if (status === 406) return 'NOT_ACCEPTABLE';
  }
  if (isErrorCode(code)) return code;
  return typeof code === 'string' ? (CLIENT_ERROR_CODES[code] ?? null) : null;
}

/**
 * Apollo Server's error normalization (`normalizeAndFormatErrors`, with stack traces off), for the direct
 * execution of REST operations: every error a GraphQLError with a code (INTERNAL_SERVER_ERROR when it has
 * none), `extensions.http` taken off, then `formatError`; a formatter that throws gives "Internal server error".
 */
export function formatErrors(
  errors: readonly GraphQLError[],
  formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError,
): GraphQLFormattedError[] {
  return errors.map((error) => {
    try {
      const { http: _http, ...extensions } = error.extensions as Record<string, unknown>;
      return formatError({ ...error.toJSON(), extensions: { ...extensions, code: extensions['code'] ?? 'INTERNAL_SERVER_ERROR' } }, error);
    } catch {
      return { message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
    }
  });
}

/**
 * Request errors (no `data`: nothing was executed) get their HTTP status from the error catalogue, as
 * REST answers do; otherwise an error thrown by the gateway before execution would leave as 500. An
 * operationName that selects no operation, and a subscription sent over HTTP (the gateway executes
 * subscriptions only over WebSocket), are refused here, before the gateway plans anything.
 */
export function requestErrorPolicy(): OperationPolicy {
  return {
    resolved({ operation, operationName }) {
      if (operation?.operation === OperationTypeNode.SUBSCRIPTION) {
        throw new GraphQLError(
          'Subscriptions are served at /graphql over WebSocket (graphql-transport-ws), Server-Sent Events (Accept: text/event-stream) or multipart HTTP (Accept: multipart/mixed;subscriptionSpec="1.0"), not as a JSON answer',
          {
            extensions: { code: 'BAD_REQUEST' },
          },
        );
      }
      if (operation) return;
      throw operationNotFound(operationName);
    },
    answered(answer) {
      const outage = isOutage(answer);
      if (answer.errors) answer.errors = capErrors(answer.errors);
      if (outage) {
        answer.status = statusOf('SERVICE_UNAVAILABLE');
        answer.headers.set('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS));
        return;
      }
      if (answer.data !== undefined) return;
      const code = answer.errors?.[0]?.extensions?.['code'];
      if (isErrorCode(code)) answer.status = statusOf(code);
    },
  };
}

/** Errors an answer lists (as many as field problems); the rest are counted, so an answer stays proportional. */
export const MAX_ERRORS = MAX_FIELD_PROBLEMS;

/**
 * The first MAX_ERRORS errors and one that counts the others (with the first one's code, so the status
 * holds). A list that already ends in its own count (MAX_ERRORS and one more) is left as it is.
 */
function capErrors(errors: readonly GraphQLFormattedError[]): GraphQLFormattedError[] {
  if (errors.length <= MAX_ERRORS + 1) return [...errors];
  const omitted = errors.length - MAX_ERRORS;
  return [
    ...errors.slice(0, MAX_ERRORS),
    {
      message: `${omitted.toLocaleString('en-US')} more errors not listed`,
      extensions: { code: errors[0]?.extensions?.['code'] ?? 'INTERNAL_SERVER_ERROR', omitted },
    },
  ];
}

/**
 * An answer that holds nothing because the database cannot be reached: no data, or only nulls at the root,
 * and a SERVICE_UNAVAILABLE error. It leaves as 503 (with Retry-After), not as a 200 with errors.
 */
function isOutage(result: { data?: Record<string, unknown> | null; errors?: readonly GraphQLFormattedError[] }): boolean {
  if (!result.errors?.some((e) => e.extensions?.['code'] === 'SERVICE_UNAVAILABLE')) return false;
  return result.data == null || Object.values(result.data).every((value) => value === null);
}

/** The error for a document whose operationName selects no operation (over HTTP and WebSocket alike). */
export function operationNotFound(operationName: string | null | undefined): GraphQLError {
  return new GraphQLError(
    operationName ? `Unknown operation named "${operationName}"` : 'Must provide operationName when the document contains several operations',
    { extensions: { code: 'BAD_REQUEST' } },
  );
}
