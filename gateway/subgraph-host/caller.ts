import type { FastifyInstance, FastifyReply } from 'fastify';
import { PRINCIPAL_HEADER, type PrincipalSigner } from '../../platform/principal.js';
import { problem, sendProblem } from '../http/problem.js';
import type { RouteTable } from '../http/route-table.js';
import type { Authenticator } from '../security/auth.js';

/**
 * Whom a subgraph server's HTTP request acts for. With PRINCIPAL_SECRET, only what the gateway signed for
 * this very call (this subgraph, this method, path and body, within 30 s): anything else is 401, `_service`,
 * `_entities` and introspection included. Without one (a loopback-only server, checked at start), the
 * request's own credential.
 */
export function registerSignedCaller(
  app: FastifyInstance,
  options: { subgraph: string; routes: RouteTable; auth: Authenticator; signer: PrincipalSigner | null },
): void {
  const { subgraph, routes, auth, signer } = options;
  app.decorateRequest('principal', null);
  const unsigned = (reply: FastifyReply, url: string) =>
    sendProblem(
      reply,
      problem('UNAUTHENTICATED', `Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only calls its gateway signed for it`, { instance: url }),
    );
  app.addHook('onRequest', async (request, reply) => {
    if (routes.isPublic(request)) {
      request.principal = auth.publicPrincipal;
      return;
    }
    if (signer) {
      // Checked against the body once it is read (preHandler); a call without a signature stops here.
      if (typeof request.headers[PRINCIPAL_HEADER] === 'string') return;
      await unsigned(reply, request.url);
      return reply;
    }
    const result = await auth.authenticate(request.headers);
    if ('principal' in result) {
      request.principal = result.principal;
      return;
    }
    await sendProblem(reply, problem('UNAUTHENTICATED', `Missing or invalid credential (${result.refused})`, { instance: request.url }));
    return reply;
  });
  app.addHook('preHandler', async (request, reply) => {
    if (!signer || request.principal) return;
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
