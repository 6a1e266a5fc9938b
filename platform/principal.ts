import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

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
  'schema:free-text',
] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);

/** A caller of a public route (the JWKS, the probes) that presented no credential: no scope, no tenant's data. */
export const ANONYMOUS_PRINCIPAL: Principal = Object.freeze({ id: 'anonymous', tenant: 'anonymous', scopes: Object.freeze([] as Scope[]) });

/** Demo mode (no credential configured): one principal holding every scope. */
export const DEMO_PRINCIPAL: Principal = Object.freeze({ id: 'demo', tenant: 'demo', scopes: Object.freeze([...SCOPES]) });

/** The system itself (health checks, one subgraph asking another): an operator. */
export const SYSTEM_PRINCIPAL: Principal = Object.freeze({ id: 'system', tenant: 'operators', scopes: Object.freeze(['ops:admin'] as Scope[]) });

/**
 * Names this deployment gives principals of its own, which no credential may claim: a keys file naming one
 * is refused at load, a JWT naming one is 401. `sandbox` is the user operators (and demo mode) act for in
 * bonding; `demo` is demo mode's principal and the tenant rows from before tenancy belong to; `operators`
 * the tenant of API_KEYS's operators, `operator-<n>` their names; `system`, `anonymous` and `documentation`
 * the principals of internal calls, public routes and generated docs.
 */
const RESERVED_PRINCIPALS: readonly string[] = ['sandbox', 'demo', 'system', 'anonymous', 'documentation'];
const RESERVED_TENANTS: readonly string[] = ['demo', 'operators', 'anonymous', 'documentation'];
const OPERATOR_NAME = /^operator-\d+$/;

/** Why a principal name or tenant may not be claimed by a credential; null when it may. */
export function reservedName(principal: string, tenant: string): string | null {
  if (RESERVED_PRINCIPALS.includes(principal) || OPERATOR_NAME.test(principal)) return `principal "${principal}" is reserved by the deployment`;
  if (RESERVED_TENANTS.includes(tenant)) return `tenant "${tenant}" is reserved by the deployment`;
  return null;
}

/** Whether two principals are the same: the same name in the same tenant (two tenants' `ci` are two). */
export const samePrincipal = (a: { id: string; tenant: string }, b: { id: string; tenant: string }) => a.id === b.id && a.tenant === b.tenant;

/** An operator: sees and changes every tenant's data. */
export const isOperator = (p: Principal) => p.scopes.includes('ops:admin');

/** Whether `p` holds `scope` (an operator holds every scope). */
export const hasScope = (p: Principal, scope: Scope) => isOperator(p) || p.scopes.includes(scope);

/** The header that carries the principal from the gateway to its subgraphs. */
export const PRINCIPAL_HEADER = 'x-ops-principal';

/** How long a signed principal header is accepted after it was made: one call's worth, no more. */
const HEADER_TTL_MS = 30_000;

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64url');

/** What a signature is bound to: the subgraph called, and the call itself (method, path and body). */
export interface SignedCall {
  /** The subgraph the call is for (its name in the supergraph). */
  subgraph: string;
  /** `POST`, `GET`, or `SUBSCRIBE` for a graphql-ws subscribe message. */
  method: string;
  /** The path with its query string (`/graphql`, `/graphql?query=...`). */
  path: string;
  /** The request body as sent (for a subscription: `subscriptionBody` of its payload). */
  body: string;
  /** The `Idempotency-Key` the call carries, if any: a change retried under another key is another call. */
  idempotencyKey?: string | undefined;
}

/** The text a graphql-ws subscribe message is signed over: its query, variables and operation name. */
export const subscriptionBody = (payload: { query: string; variables?: unknown; operationName?: string | null }) =>
  JSON.stringify([payload.query, payload.variables ?? null, payload.operationName ?? null]);

const callDigest = (call: SignedCall) =>
  createHash('sha256')
    .update(`${call.subgraph}\n${call.method}\n${call.path}\n${call.idempotencyKey ?? ''}\n`, 'utf8')
    .update(call.body, 'utf8')
    .digest('base64url');

/**
 * Signs principals for subgraph servers and checks them there: HMAC-SHA256 over the principal, the subgraph
 * called, a digest of the call (method, path, `Idempotency-Key`, body), an expiry 30 s away and a nonce. A
 * header cannot be made without the secret, and a captured one runs nothing else: not another document, not
 * other variables or another idempotency key, not on another subgraph, not after half a minute, and not a
 * second time (the process that accepted it keeps its nonce until it expires). The gateway and its subgraph processes share the secret
 * (PRINCIPAL_SECRET). Without one there is no signer: subgraphs in the gateway's process receive the
 * principal itself, and subgraph servers (on loopback only) authenticate the gateway's own credential.
 */
export class PrincipalSigner {
  private readonly key: Buffer;
  /**
   * The nonces of the headers accepted and not yet expired, with their expiry, oldest first: a header is
   * accepted once (per process), so a captured one cannot be replayed even within its 30 s.
   */
  private readonly accepted = new Map<string, number>();

  private constructor(secret: string) {
    this.key = Buffer.from(secret, 'utf8');
  }

  static from(secret: string | undefined): PrincipalSigner | null {
    return secret ? new PrincipalSigner(secret) : null;
  }

  sign(principal: Principal, call: SignedCall, now = Date.now()): string {
    const body = b64(
      JSON.stringify({
        id: principal.id,
        tenant: principal.tenant,
        scopes: principal.scopes,
        sub: call.subgraph,
        dig: callDigest(call),
        exp: now + HEADER_TTL_MS,
        nonce: randomBytes(12).toString('base64url'),
      }),
    );
    return `${body}.${this.mac(body)}`;
  }

  /** The principal of a header signed for exactly this call and not expired; null otherwise. */
  verify(header: string | undefined, call: SignedCall, now = Date.now()): Principal | null {
    if (!header) return null;
    const [body, mac, extra] = header.split('.');
    if (!body || !mac || extra !== undefined) return null;
    const expected = Buffer.from(this.mac(body), 'utf8');
    const given = Buffer.from(mac, 'utf8');
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    let claims: { id?: unknown; tenant?: unknown; scopes?: unknown; sub?: unknown; dig?: unknown; exp?: unknown; nonce?: unknown };
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as typeof claims;
    } catch {
      return null;
    }
    const { id, tenant, scopes, sub, dig, exp, nonce } = claims;
    if (typeof id !== 'string' || typeof tenant !== 'string' || !Array.isArray(scopes) || typeof nonce !== 'string') return null;
    if (sub !== call.subgraph || dig !== callDigest(call) || typeof exp !== 'number' || exp < now || exp > now + HEADER_TTL_MS + 5_000) return null;
    // Once only: the nonces of accepted headers are kept until they expire.
    for (const [kept, expires] of this.accepted) {
      if (expires >= now) break;
      this.accepted.delete(kept);
    }
    if (this.accepted.has(nonce)) return null;
    this.accepted.set(nonce, exp);
    return { id, tenant, scopes: scopes.filter((s): s is Scope => typeof s === 'string' && isScope(s)) };
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
