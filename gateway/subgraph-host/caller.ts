import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { PRINCIPAL_HEADER, type Principal, type PrincipalSigner } from '../../platform/principal.js';
import { problem, sendProblem } from '../http/problem.js';
import type { RouteTable } from '../http/route-table.js';

/**
 * Whom a subgraph server's HTTP request acts for: only what the gateway signed for this very call (this
 * subgraph, this method, path, `Idempotency-Key` and body, within 30 s, once). Anything else is 401,
 * `_service`, `_entities` and introspection included, whatever credential it carries: a subgraph server
 * reads no client credential. Public routes (the probes) act for the public principal.
 */
export const signedCallerPlugin = fp(
  async (app: FastifyInstance, options: { subgraph: string; publicPrincipal: Principal; signer: PrincipalSigner }) =>
    registerSignedCaller(app, { ...options, routes: app.routeTable }),
  { name: 'signed-caller', fastify: '5.x' },
);

function registerSignedCaller(
  app: FastifyInstance,
  options: { subgraph: string; routes: RouteTable; publicPrincipal: Principal; signer: PrincipalSigner },
): void {
  const { subgraph, routes, publicPrincipal, signer } = options;
  app.decorateRequest('principal', null);
  const unsigned = (reply: FastifyReply, url: string) =>
    sendProblem(
      reply,
      problem('UNAUTHENTICATED', `Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only calls its gateway signed for it`, { instance: url }),
    );
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = publicPrincipal;
      return;
    }
    // Checked against the body once it is read (preHandler); a call without a signature stops here.
    if (typeof request.headers[PRINCIPAL_HEADER] === 'string') return;
    await unsigned(reply, request.url);
    return reply;
  });
  app.addHook('preHandler', async (request, reply) => {
    if (request.principal) return;
    const idempotencyKey = request.headers['idempotency-key'];
    const call = {
      subgraph,
      method: request.method,
      path: request.url,
      body: request.rawBody,
      idempotencyKey: Array.isArray(idempotencyKey) ? idempotencyKey.join(',') : idempotencyKey,
    };
    const signed = signer.verify(request.headers[PRINCIPAL_HEADER] as string | undefined, call);
    if (signed) {
      request.principal = signed;
      return;
    }
    await unsigned(reply, request.url);
    return reply;
  });
}
