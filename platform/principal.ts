import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Who a request acts for. Every credential the gateway accepts resolves to one: an API key's entry, a
 * bearer JWT's subject, or the demo principal when no credential is configured. Scopes name what it may
 * do; the tenant names whose data it sees. `ops:admin` is every scope over every tenant.
 */
export interface Principal {
  id: string;
  tenant: string;
  scopes: readonly Scope[];
}

export const SCOPES = [
  'ops:admin',
  'fleet:read',
  'rental:read',
  'rental:book',
  'prediction:read',
  'bonding:use',
  'features:read',
  'features:materialize',
  'optimization:read',
  'optimization:run',
  'metrics:read',
  'schema:read',
] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);

/** A caller of a public route (the JWKS, the probes) that presented no credential: no scope, no tenant's data. */
export const ANONYMOUS_PRINCIPAL: Principal = Object.freeze({ id: 'anonymous', tenant: 'anonymous', scopes: Object.freeze([] as Scope[]) });

/** Demo mode (no credential configured): one principal holding every scope. */
export const DEMO_PRINCIPAL: Principal = Object.freeze({ id: 'demo', tenant: 'demo', scopes: Object.freeze([...SCOPES]) });

/** The system itself (health checks, one subgraph asking another): an operator. */
export const SYSTEM_PRINCIPAL: Principal = Object.freeze({ id: 'system', tenant: 'operators', scopes: Object.freeze(['ops:admin'] as Scope[]) });

/** An operator: sees and changes every tenant's data. */
export const isOperator = (p: Principal) => p.scopes.includes('ops:admin');

/** Whether `p` may act on data of `tenant`: its own tenant, or any as an operator. */
export const mayActFor = (p: Principal, tenant: string) => isOperator(p) || p.tenant === tenant;

/** Whether `p` holds `scope` (an operator holds every scope). */
export const hasScope = (p: Principal, scope: Scope) => isOperator(p) || p.scopes.includes(scope);

/** The header that carries the principal from the gateway to its subgraphs. */
export const PRINCIPAL_HEADER = 'x-ops-principal';

/** How long a signed principal header is accepted after it was made. */
const HEADER_TTL_MS = 60_000;

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64url');

/**
 * Signs principals for subgraphs and checks them there: HMAC-SHA256 over the principal, the request id
 * and an expiry, so a header cannot be made without the secret, reused for another request, or replayed
 * after a minute. The gateway and its subgraph processes share the secret (PRINCIPAL_SECRET). Without
 * one there is no signer: subgraphs in the gateway's process receive the principal itself, and subgraph
 * servers authenticate the gateway's own credential (demo mode, or operator keys).
 */
export class PrincipalSigner {
  private readonly key: Buffer;

  private constructor(secret: string) {
    this.key = Buffer.from(secret, 'utf8');
  }

  static from(secret: string | undefined): PrincipalSigner | null {
    return secret ? new PrincipalSigner(secret) : null;
  }

  sign(principal: Principal, requestId: string, now = Date.now()): string {
    const body = b64(JSON.stringify({ id: principal.id, tenant: principal.tenant, scopes: principal.scopes, rid: requestId, exp: now + HEADER_TTL_MS }));
    return `${body}.${this.mac(body)}`;
  }

  /** The principal of a header signed for `requestId` and not expired; null otherwise. */
  verify(header: string | undefined, requestId: string | undefined, now = Date.now()): Principal | null {
    if (!header || !requestId) return null;
    const [body, mac, extra] = header.split('.');
    if (!body || !mac || extra !== undefined) return null;
    const expected = Buffer.from(this.mac(body), 'utf8');
    const given = Buffer.from(mac, 'utf8');
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    let claims: { id?: unknown; tenant?: unknown; scopes?: unknown; rid?: unknown; exp?: unknown };
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as typeof claims;
    } catch {
      return null;
    }
    const { id, tenant, scopes, rid, exp } = claims;
    if (typeof id !== 'string' || typeof tenant !== 'string' || !Array.isArray(scopes)) return null;
    if (rid !== requestId || typeof exp !== 'number' || exp < now) return null;
    return { id, tenant, scopes: scopes.filter((s): s is Scope => typeof s === 'string' && isScope(s)) };
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
