import type { FastifyReply, FastifyRequest } from 'fastify';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../platform/db-errors.js';
import { errorCatalogue, statusOf, type ErrorCode, type FieldProblem } from '../../platform/errors.js';

/** RFC 9457 problem details plus the catalogue `code` and, for input errors, the offending fields. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  instance?: string;
  errors?: FieldProblem[];
  /** How many field problems were left out of `errors` (it lists at most the first 25). */
  errors_truncated?: number;
}

export function problem(code: ErrorCode, detail: string, extra: { instance?: string; errors?: FieldProblem[]; errorsTruncated?: number } = {}): Problem {
  return {
    type: `urn:ops-supergraph:problem:${code.toLowerCase().replace(/_/g, '-')}`,
    title: errorCatalogue[code].title,
    status: statusOf(code),
    detail,
    code,
    ...(extra.instance ? { instance: extra.instance } : {}),
    ...(extra.errors && extra.errors.length > 0 ? { errors: extra.errors } : {}),
    ...(extra.errorsTruncated ? { errors_truncated: extra.errorsTruncated } : {}),
  };
}

/** Problem details that also read as a GraphQL response, for failures on /graphql before execution. */
export type GraphQLProblem = Omit<Problem, 'errors'> & { errors: { message: string; extensions: { code: ErrorCode } }[] };

export const GRAPHQL_PATH = '/graphql';

/** The path of a request URL, without its query string (for messages; routes are known by the router's match). */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * Whether a request was matched to the GraphQL route: by fastify's router (which decodes the path, so
 * `/%67raphql` is the same route), never by reading the URL again.
 */
export function onGraphQLRoute(request: FastifyRequest): boolean {
  return request.routeOptions.url === GRAPHQL_PATH;
}

/** Problem details for a request: on the GraphQL route they also carry a GraphQL `errors` array. */
export function problemAt(graphql: boolean, body: Problem): Problem | GraphQLProblem {
  if (!graphql) return body;
  const { errors: _fields, errors_truncated: _truncated, ...rest } = body;
  return { ...rest, errors: [{ message: body.detail, extensions: { code: body.code } }] };
}

export function sendProblem(reply: FastifyReply, body: Problem | GraphQLProblem): FastifyReply {
  if (body.status === 401) reply.header('www-authenticate', 'Bearer realm="ops-supergraph"');
  if (body.code === 'SERVICE_UNAVAILABLE') reply.header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS));
  return reply.code(body.status).type('application/problem+json').send(body);
}

/** Answers a request from a hook with problem details (GraphQL-shaped on /graphql); return the reply to stop it there. */
export async function refuse(reply: FastifyReply, request: FastifyRequest, code: ErrorCode, detail: string): Promise<FastifyReply> {
  await sendProblem(reply, problemAt(onGraphQLRoute(request), problem(code, detail, { instance: request.url })));
  return reply;
}
