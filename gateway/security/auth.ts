import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { z } from 'zod';
import { ConfigError, isDemoMode, type PlatformConfig } from '../../platform/config.js';
import { ANONYMOUS_PRINCIPAL, DEMO_PRINCIPAL, isScope, reservedName, samePrincipal, SCOPES, type Principal, type Scope } from '../../platform/principal.js';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * What a request's credentials come to: a principal (and, for a JWT, the instant it expires, in ms since
 * the epoch: a WebSocket opened with it is closed then), or a refusal (401) with its reason.
 */
type Authentication = { principal: Principal; expiresAt?: number } | { refused: string };

export interface Authenticator {
  /** False in demo mode (no credential configured): every call acts as the demo principal. */
  readonly enabled: boolean;
  /** Whether bearer JWTs are accepted (OpenAPI and the 401's challenge say so). */
  readonly acceptsJwt: boolean;
  /** Whom a public route (the probes, the JWKS) acts for: nobody in particular, or the demo principal. */
  readonly publicPrincipal: Principal;
  /**
   * The principal of `x-api-key: <key>` and/or `Authorization: Bearer <key or JWT>`: at least one must be
   * sent, every one sent must be valid (a wrong credential is never excused by a right one next to it),
   * and all must name the same principal.
   */
  authenticate(headers: CredentialHeaders): Promise<Authentication>;
  /**
   * Reads API_KEYS_FILE again (SIGHUP): the whole file checked before any key changes; on a failure the keys
   * before stay and the error names the file and entry.
   */
  reloadKeys(): { ok: true; keys: number } | { ok: false; error: string };
}

/**
 * Why a credential presented earlier no longer stands for `principal` (refused now, or naming someone
 * else), or null while it does: the check an open socket or stream is given again (AUTH_RECHECK_S, SIGHUP).
 */
export async function revocationOf(auth: Authenticator, presented: CredentialHeaders, principal: Principal): Promise<string | null> {
  const result = await auth.authenticate(presented);
  if ('refused' in result) return result.refused;
  return samePrincipal(result.principal, principal) ? null : 'it names another principal';
}

interface CredentialHeaders {
  'x-api-key'?: string | string[] | undefined;
  authorization?: string | undefined;
}

/** One entry of API_KEYS_FILE. */
const keyEntry = z
  .strictObject({
    key: z.string().min(16, 'a key must be at least 16 characters').optional(),
    key_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'key_sha256 must be 64 hex digits (the SHA-256 of the key)')
      .optional(),
    principal: z.string().min(1).max(200),
    tenant: z.string().min(1).max(200),
    scopes: z.array(z.enum(SCOPES, { message: `each scope must be one of ${SCOPES.join(', ')}` })).min(1),
  })
  .refine((e) => (e.key === undefined) !== (e.key_sha256 === undefined), { message: 'give exactly one of key and key_sha256' })
  .superRefine((e, ctx) => {
    const reserved = reservedName(e.principal, e.tenant);
    if (reserved) ctx.addIssue({ code: 'custom', message: `${reserved}: choose another name` });
  });
const keyFile = z.array(keyEntry).min(1, 'the file lists no key');

interface KeyedPrincipal {
  digest: Buffer;
  principal: Principal;
}

/** Reads API_KEYS_FILE: a bad file stops the start with a message naming it and the entry. */
export function readKeyFile(path: string): KeyedPrincipal[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError([`API_KEYS_FILE: cannot read ${path} as JSON (${error instanceof Error ? error.message : String(error)})`]);
  }
  const parsed = keyFile.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `API_KEYS_FILE ${path}: entry ${i.path.join('.') || '(file)'}: ${i.message}`));
  }
  const entries = parsed.data.map((e) => ({
    digest: e.key !== undefined ? digest(e.key) : Buffer.from(e.key_sha256!, 'hex'),
    principal: Object.freeze({ id: e.principal, tenant: e.tenant, scopes: Object.freeze([...new Set(e.scopes)]) }),
  }));
  const seen = new Set<string>();
  for (const [i, e] of entries.entries()) {
    const hex = e.digest.toString('hex');
    if (seen.has(hex)) throw new ConfigError([`API_KEYS_FILE ${path}: entry ${i} repeats a key`]);
    seen.add(hex);
  }
  return entries;
}

/** The plain API_KEYS list: operator keys (`ops:admin`), one principal each. */
function operatorKeys(keys: readonly string[]): KeyedPrincipal[] {
  return keys.map((key, i) => ({
    digest: digest(key),
    principal: Object.freeze({ id: `operator-${i + 1}`, tenant: 'operators', scopes: Object.freeze(['ops:admin'] as Scope[]) }),
  }));
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
/** Asymmetric algorithms only: `none` and HMAC (a public key used as a shared secret) are never accepted. */
const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

/**
 * API keys are kept only as SHA-256 digests and compared in constant time against every configured key,
 * so neither a match nor its position shows in the timing. JWTs are verified with `jose` against the
 * identity provider's JWKS (fetched and cached by `createRemoteJWKSet`, refetched for an unknown `kid`).
 */
export function createAuthenticator(
  config: Pick<
    PlatformConfig,
    'API_KEYS' | 'API_KEYS_FILE' | 'AUTH_JWKS_URL' | 'AUTH_ISSUER' | 'AUTH_AUDIENCE' | 'AUTH_TENANT_CLAIM' | 'AUTH_SCOPES_CLAIM' | 'AUTH_RECHECK_S'
  >,
): Authenticator {
  let keys = [...operatorKeys(config.API_KEYS), ...(config.API_KEYS_FILE ? readKeyFile(config.API_KEYS_FILE) : [])];
  // The JWKS is kept no longer than the recheck interval: a signing key the provider removed stops
  // verifying tokens (and the open connections' recheck ends theirs) within that time.
  const jwks = config.AUTH_JWKS_URL ? createRemoteJWKSet(new URL(config.AUTH_JWKS_URL), { cacheMaxAge: config.AUTH_RECHECK_S * 1000 }) : null;
  const enabled = !isDemoMode(config);

  const byKey = (key: string): Principal | null => {
    const presented = digest(key);
    let found: Principal | null = null;
    for (const k of keys) if (timingSafeEqual(k.digest, presented)) found = k.principal;
    return found;
  };

  const scopesOf = (payload: JWTPayload): Scope[] => {
    const claim = config.AUTH_SCOPES_CLAIM ? payload[config.AUTH_SCOPES_CLAIM] : (payload['scope'] ?? payload['scp']);
    const list = typeof claim === 'string' ? claim.split(/\s+/) : Array.isArray(claim) ? claim.filter((s): s is string => typeof s === 'string') : [];
    return [...new Set(list.filter(isScope))];
  };

  const byJwt = async (token: string): Promise<Authentication> => {
    if (!jwks) return { refused: 'bearer JWTs are not accepted here' };
    try {
      const { payload } = await jwtVerify(token, jwks, {
        issuer: config.AUTH_ISSUER!,
        audience: config.AUTH_AUDIENCE!,
        algorithms: JWT_ALGORITHMS,
        requiredClaims: ['sub', 'exp'],
      });
      const tenant = payload[config.AUTH_TENANT_CLAIM];
      if (typeof tenant !== 'string' || tenant.length === 0) return { refused: `the token has no ${config.AUTH_TENANT_CLAIM} claim` };
      const reserved = reservedName(payload.sub!, tenant);
      if (reserved) return { refused: `the token names a ${reserved}: only the deployment itself uses it` };
      return { principal: { id: payload.sub!, tenant, scopes: scopesOf(payload) }, expiresAt: payload.exp! * 1000 };
    } catch (error) {
      return { refused: `the token is not valid (${(error as { code?: string }).code ?? 'ERR_JWT_INVALID'})` };
    }
  };

  return {
    enabled,
    acceptsJwt: jwks !== null,
    reloadKeys() {
      if (!config.API_KEYS_FILE) return { ok: false, error: 'API_KEYS_FILE is not set: there is no file to read' };
      try {
        const read = readKeyFile(config.API_KEYS_FILE);
        keys = [...operatorKeys(config.API_KEYS), ...read];
        return { ok: true, keys: read.length };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      }
    },
    publicPrincipal: enabled ? ANONYMOUS_PRINCIPAL : DEMO_PRINCIPAL,
    async authenticate(headers) {
      if (!enabled) return { principal: DEMO_PRINCIPAL };
      const presented = credentialsOf(headers);
      if (presented.length === 0) return { refused: 'no credential: send x-api-key or Authorization: Bearer' };
      const principals: Principal[] = [];
      let expiresAt: number | undefined;
      for (const credential of presented) {
        if (!credential) return { refused: 'an empty or repeated credential header' };
        if (jwks && JWT_SHAPE.test(credential)) {
          const result = await byJwt(credential);
          if ('refused' in result) return result;
          principals.push(result.principal);
          expiresAt = result.expiresAt;
          continue;
        }
        const principal = byKey(credential);
        if (!principal) return { refused: 'invalid API key' };
        principals.push(principal);
      }
      const first = principals[0]!;
      if (principals.some((p) => !samePrincipal(p, first))) return { refused: 'the credentials name different principals' };
      return expiresAt === undefined ? { principal: first } : { principal: first, expiresAt };
    },
  };
}

/** The credentials a request presents; a header sent twice, or an empty one, counts as a wrong one. */
function credentialsOf(headers: CredentialHeaders): (string | undefined)[] {
  const found: (string | undefined)[] = [];
  const apiKey = headers['x-api-key'];
  if (apiKey !== undefined) found.push(typeof apiKey === 'string' && apiKey.length > 0 ? apiKey : undefined);
  const authorization = headers.authorization;
  if (authorization !== undefined && /^Bearer(\s|$)/i.test(authorization)) found.push(/^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]);
  return found;
}
