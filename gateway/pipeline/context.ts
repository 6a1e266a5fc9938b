import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Principal } from '../../platform/principal.js';
import type { IncrementalSlot } from '../planner/incremental.js';
import type { Intake } from './pipeline.js';

/** Request headers the gateway passes on to subgraphs (in process and over HTTP alike). */
export const FORWARDED_HEADERS = ['idempotency-key', 'x-request-id'] as const;

export interface GatewayContext {
  /** Only the forwarded headers; credentials stop at the gateway. */
  headers: Record<string, string | undefined>;
  /** Who the request acts for (gateway/security/auth.ts); subgraphs receive it signed (platform/principal.ts). */
  principal: Principal;
  /** Incremental delivery of `@defer` (gateway/planner/incremental.ts); absent: whole answers. */
  incremental?: IncrementalSlot;
  /** When the gateway took the request in (`performance.now()`): an operation's time is measured from it. */
  receivedAt?: number;
  /** The client as it names itself (`apollographql-client-name`, `-version`): field usage is counted by it. */
  client: { name: string | null; version: string | null };
  /** The REST route the request came in by (`GET /rental/fleet/machines`): how usage names its operation. */
  route?: string;
  /**
   * The operation its door took in (gateway/pipeline/pipeline.ts): document resolution and the request
   * limits ran on this text. An execution refuses an operation whose text is not this one.
   */
  intake?: Intake;
  /**
   * Rate-limit tokens the request already paid at its door (the HTTP edge takes one before the body is
   * read): the rate charge takes them off the operation's cost, once. @default 0
   */
  prepaid?: number;
  /**
   * The event log positions of the request (gateway/sources/state-cache.ts): the one its caller asked to read
   * at least (`state-position`), and the newest its writes reached (answered as `state-position`).
   */
  statePositions?: StatePositions;
}

export interface StatePositions {
  asked: bigint | null;
  written: bigint | null;
}

/** Identifies a principal in keys of shared work (collapsed fetches, shared streams): answers depend on it. */
export function principalKey(principal: Principal): string {
  let key = principalKeys.get(principal);
  if (key === undefined) principalKeys.set(principal, (key = JSON.stringify([principal.id, principal.tenant, principal.scopes])));
  return key;
}

/** Kept per principal object (one per credential, or per token): a principal is never changed once made. */
const principalKeys = new WeakMap<Principal, string>();

export function gatewayContextFrom(headers: IncomingHttpHeaders | Record<string, string | undefined>, principal: Principal): GatewayContext {
  const picked: Record<string, string | undefined> = {};
  for (const name of FORWARDED_HEADERS) {
    const value = headers[name];
    picked[name] = Array.isArray(value) ? value[0] : value;
  }
  return {
    headers: picked,
    principal,
    statePositions: { asked: null, written: null },
    receivedAt: performance.now(),
    client: { name: headerValue(headers['apollographql-client-name']), version: headerValue(headers['apollographql-client-version']) },
  };
}

/** A client-name header as sent (first value, trimmed, at most 100 characters), or null. */
function headerValue(value: string | string[] | undefined): string | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  return text ? text.slice(0, 100) : null;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request acts for; null only on public routes (probes, the JWKS). */
    principal: Principal | null;
    /** Rate-limit tokens the request paid at the edge, for its first operation (gateway/security/rate-limit.ts). */
    prepaid: number;
    /** When the request's credential expires (a JWT's `exp`, ms since the epoch); null: it does not. */
    credentialExpiresAt: number | null;
    /** The event log position the caller asked to read at least (`state-position`, gateway/sources/state-route.ts); null: none. */
    statePosition: bigint | null;
  }
}

/** The context of an operation an HTTP request carries, with what it already paid at the edge. */
export function gatewayContextOfRequest(request: FastifyRequest, intake: Intake): GatewayContext {
  const context = gatewayContextFrom(request.headers, principalOf(request));
  context.intake = intake;
  context.prepaid = request.prepaid;
  context.statePositions!.asked = request.statePosition;
  // The token pays for one operation only.
  request.prepaid = 0;
  return context;
}

/** The principal of an authenticated request (every route that runs an operation is authenticated). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error(`request ${request.id} to ${request.url} reached an operation without a principal`);
  return request.principal;
}
