import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/*
 * Every request has an id: the caller's `X-Request-Id` when it is a plain token (at most 128 characters of
 * letters, digits and `._:-`), a new UUID otherwise. It labels the request's log lines (`reqId`), comes back
 * in the answer's `X-Request-Id`, and is forwarded to the subgraphs, whose servers log it as theirs, so one
 * id follows a request through every process it reaches.
 */

const REQUEST_ID_HEADER = 'x-request-id';
const TOKEN = /^[A-Za-z0-9._:-]{1,128}$/;

/** fastify's `genReqId`: the caller's id when acceptable, else a new one. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  const value = Array.isArray(given) ? given[0] : given;
  return value !== undefined && TOKEN.test(value) ? value : randomUUID();
}

/** Returns the id in the answer and puts it where the forwarded headers are read from. */
export function exposeRequestId(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    request.headers[REQUEST_ID_HEADER] = request.id;
    void reply.header(REQUEST_ID_HEADER, request.id);
  });
}
