import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Principal } from '../../platform/principal.js';
import type { IncrementalSlot } from './incremental.js';

/** Request headers the gateway passes on to subgraphs (in process and over HTTP alike). */
export const FORWARDED_HEADERS = ['idempotency-key', 'x-request-id'] as const;

export interface GatewayContext {
  /** Only the forwarded headers; credentials stop at the gateway. */
  headers: Record<string, string | undefined>;
  /** Who the request acts for (gateway/security/auth.ts); subgraphs receive it signed (platform/principal.ts). */
  principal: Principal;
  /** Incremental delivery of `@defer` (gateway/execution/incremental.ts); absent: whole answers. */
  incremental?: IncrementalSlot;
}

/** Identifies a principal in keys of shared work (collapsed fetches, shared streams): answers depend on it. */
export const principalKey = (p: Principal) => JSON.stringify([p.id, p.tenant, p.scopes]);

export function gatewayContextFrom(headers: IncomingHttpHeaders | Record<string, string | undefined>, principal: Principal): GatewayContext {
  const picked: Record<string, string | undefined> = {};
  for (const name of FORWARDED_HEADERS) {
    const value = headers[name];
    picked[name] = Array.isArray(value) ? value[0] : value;
  }
  return { headers: picked, principal };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request acts for; null only on public routes (probes, the JWKS). */
    principal: Principal | null;
  }
}

/** The principal of an authenticated request (every route that runs an operation is authenticated). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error(`request ${request.id} to ${request.url} reached an operation without a principal`);
  return request.principal;
}
