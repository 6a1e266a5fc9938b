import { GraphQLError } from 'graphql';

/**
 * The one error catalogue. Every error a caller can see carries one of these codes in
 * `extensions.code` (GraphQL) or `code` (REST problem details); the HTTP status of a REST
 * answer is always taken from here, never chosen in a handler.
 */
export const errorCatalogue = {
  BAD_USER_INPUT: { status: 400, title: 'Bad request' },
  GRAPHQL_PARSE_FAILED: { status: 400, title: 'Malformed GraphQL document' },
  GRAPHQL_VALIDATION_FAILED: { status: 400, title: 'Invalid GraphQL operation' },
  PERSISTED_QUERY_NOT_SUPPORTED: { status: 400, title: 'Persisted queries not supported' },
  PERSISTED_QUERY_NOT_FOUND: { status: 400, title: 'Persisted document not found' },
  PERSISTED_QUERY_NOT_IN_LIST: { status: 403, title: 'Operation not in the safelist' },
  BAD_REQUEST: { status: 400, title: 'Bad request' },
  TOKEN_LIMIT_EXCEEDED: { status: 400, title: 'GraphQL document too long' },
  DEPTH_LIMIT_EXCEEDED: { status: 400, title: 'GraphQL operation too deep' },
  ALIAS_LIMIT_EXCEEDED: { status: 400, title: 'Too many aliases' },
  ROOT_FIELD_LIMIT_EXCEEDED: { status: 400, title: 'Too many root fields' },
  FIELD_LIMIT_EXCEEDED: { status: 400, title: 'Too many fields' },
  DIRECTIVE_LIMIT_EXCEEDED: { status: 400, title: 'Too many directives' },
  COST_LIMIT_EXCEEDED: { status: 400, title: 'GraphQL operation too expensive' },
  LIST_LIMIT_EXCEEDED: { status: 400, title: 'Too many list items' },
  SUBSCRIPTION_LIMIT_EXCEEDED: { status: 400, title: 'Too many subscriptions on one connection' },
  UNAUTHENTICATED: { status: 401, title: 'Authentication required' },
  FORBIDDEN: { status: 403, title: 'Forbidden' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  NOT_ACCEPTABLE: { status: 406, title: 'Not acceptable' },
  REQUEST_TIMEOUT: { status: 408, title: 'Request timeout' },
  CONFLICT: { status: 409, title: 'Conflict' },
  GONE: { status: 410, title: 'Gone' },
  CURSOR_EXPIRED: { status: 410, title: 'Resume cursor older than the events kept' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  URI_TOO_LONG: { status: 414, title: 'URI too long' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'Idempotency-Key reused' },
  BATCH_LIMIT_EXCEEDED: { status: 422, title: 'Too many operations in one batch' },
  RATE_LIMITED: { status: 429, title: 'Too many requests' },
  REQUEST_HEADER_FIELDS_TOO_LARGE: { status: 431, title: 'Request header fields too large' },
  INTERNAL_SERVER_ERROR: { status: 500, title: 'Internal server error' },
  UPSTREAM_UNAVAILABLE: { status: 502, title: 'Upstream service unavailable' },
  SERVICE_UNAVAILABLE: { status: 503, title: 'Service unavailable' },
} as const;

export type ErrorCode = keyof typeof errorCatalogue;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorCatalogue, value);
}

/** HTTP status for a code; unknown codes are server faults. */
export function statusOf(code: unknown): number {
  return isErrorCode(code) ? errorCatalogue[code].status : 500;
}

/** One offending input field, named as the caller spelled it. */
export interface FieldProblem {
  field: string;
  message: string;
}

/** A GraphQL error with a catalogued code (and the offending fields, for input errors). */
export function domainError(code: ErrorCode, message: string, fields?: FieldProblem[]): GraphQLError {
  return new GraphQLError(message, {
    extensions: { code, ...(fields && fields.length > 0 ? { fields } : {}) },
  });
}
