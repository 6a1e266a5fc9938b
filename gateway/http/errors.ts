import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyRequest } from 'fastify';
import { statusOf, type ErrorCode } from '../../platform/errors.js';
import { onGraphQLRoute, problem, problemAt, type GraphQLProblem, type Problem } from './problem.js';

/*
 * Errors raised by the HTTP layer itself (routing, body parsing, limits, malformed requests) as problem
 * details, like every other error: fastify's error handler, its `frameworkErrors` hook (router errors that
 * happen before any route runs) and its `clientErrorHandler` (requests Node cannot even parse) all answer
 * through here.
 */

const BY_STATUS: Readonly<Record<number, ErrorCode>> = {
  408: 'REQUEST_TIMEOUT',
  413: 'PAYLOAD_TOO_LARGE',
  414: 'URI_TOO_LONG',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  431: 'REQUEST_HEADER_FIELDS_TOO_LARGE',
};

const DETAILS: Readonly<Record<string, (request: FastifyRequest) => string>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: (request) =>
    `Content-Type ${request.headers['content-type'] ?? '(none)'} is not supported: send a JSON body with Content-Type: application/json`,
  // fastify refuses both malformed JSON and JSON holding prototype-poisoning keys with this one code.
  FST_ERR_CTP_INVALID_JSON_BODY: () => 'Body is not valid JSON, or holds a "__proto__" or "constructor.prototype" key, which is refused',
  FST_ERR_BAD_URL: () => 'The URL is malformed (invalid percent-encoding)',
  FST_ERR_MAX_PARAM_LENGTH: () => 'A path segment of the URL is too long',
};

/** A fastify error as problem details; its 4xx status is kept, anything else is a fault (500). */
export function frameworkProblem(error: FastifyError, request: FastifyRequest): Problem | GraphQLProblem {
  const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  const code: ErrorCode = status === 500 ? 'INTERNAL_SERVER_ERROR' : (BY_STATUS[status] ?? 'BAD_REQUEST');
  const detail = status === 500 ? 'Internal server error' : (DETAILS[error.code]?.(request) ?? error.message);
  return problemAt(onGraphQLRoute(request), { ...problem(code, detail, { instance: request.url }), status });
}

const CLIENT_ERRORS: Readonly<Record<string, { code: ErrorCode; detail: string }>> = {
  HPE_HEADER_OVERFLOW: { code: 'REQUEST_HEADER_FIELDS_TOO_LARGE', detail: 'The request line and headers exceed 16 KiB' },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'REQUEST_TIMEOUT', detail: 'The request was not received in time' },
};

/**
 * fastify's `clientErrorHandler`: a request Node could not parse (oversized headers, a timeout, bad
 * framing) never reaches fastify, so it is answered on the socket, as problem details, and closed.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const known = (error.code && CLIENT_ERRORS[error.code]) || { code: 'BAD_REQUEST' as const, detail: 'The request could not be parsed' };
  const status = statusOf(known.code);
  const body = JSON.stringify(problem(known.code, known.detail));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
