import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Database } from '../../platform/db.js';
import { appendEvents } from '../../platform/outbox.js';
import { stateTag } from '../../platform/state-trace.js';
import { STATE_TYPES, TOPICS } from './records.js';

const QUOTE_ISSUER = 'ops-supergraph/rental';
const ALG = 'EdDSA';

/** The signed claims of a quote: what a partner can check offline. */
interface QuoteClaims {
  quote_id: string;
  machine_ids: string[];
  location_id: string;
  total: number;
  currency: string;
  /** Seconds since the epoch, as JWT `exp`. */
  exp: number;
  iat: number;
}

export interface PublicJwk extends JWK {
  kid: string;
  alg: string;
  use: 'sig';
}

export interface QuoteSigner {
  sign(claims: QuoteClaims): Promise<string>;
  /** Every key that may have signed a live quote, for `GET /rental/pricing/keys`. */
  jwks(): Promise<{ keys: PublicJwk[] }>;
}

/**
 * Loads the signing key: the configured one, else the newest in the database, else a new Ed25519 pair
 * that is stored so quotes stay verifiable across restarts and instances. A key stored is announced
 * (`rental.signing_key`): the published keys are an answer (`quoteSigningKeys`) the gateways keep.
 */
export async function createQuoteSigner(db: Database, configuredPrivateJwk?: string): Promise<QuoteSigner> {
  let privateJwk: JWK;
  if (configuredPrivateJwk) {
    privateJwk = parseConfiguredKey(configuredPrivateJwk);
  } else {
    const existing = await db.query<{ private_jwk: JWK }>('SELECT private_jwk FROM rental_signing_keys ORDER BY created_at DESC, kid LIMIT 1');
    if (existing.rows[0]) {
      privateJwk = existing.rows[0].private_jwk;
    } else {
      const { privateKey } = await generateKeyPair(ALG, { crv: 'Ed25519', extractable: true });
      privateJwk = await exportJWK(privateKey);
    }
  }
  const { d: _secret, ...publicPart } = privateJwk;
  const kid = await calculateJwkThumbprint(publicPart);
  await storeKey(db, kid, privateJwk, publicPart);
  // Two instances starting on an empty database may each generate a key; both are published.
  const key = (await importJWK(privateJwk, ALG)) as CryptoKey;
  return {
    sign: (claims) =>
      new SignJWT({ ...claims }).setProtectedHeader({ alg: ALG, kid, typ: 'JWT' }).setIssuer(QUOTE_ISSUER).setSubject(claims.quote_id).sign(key),
    async jwks() {
      const res = await db.query<{ kid: string; public_jwk: JWK }>('SELECT kid, public_jwk FROM rental_signing_keys ORDER BY created_at DESC, kid');
      return { keys: res.rows.map((r) => ({ ...r.public_jwk, kid: r.kid, alg: ALG, use: 'sig' as const })) };
    },
  };
}

/** Stores the key unless it is there, with the event announcing it, in one transaction. */
async function storeKey(db: Database, kid: string, privateJwk: JWK, publicPart: JWK): Promise<void> {
  const known = await db.query('SELECT 1 FROM rental_signing_keys WHERE kid = $1', [kid]);
  if (known.rowCount > 0) return;
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO rental_signing_keys (kid, private_jwk, public_jwk) VALUES ($1, $2::jsonb, $3::jsonb)
       ON CONFLICT (kid) DO NOTHING`,
      [kid, JSON.stringify(privateJwk), JSON.stringify(publicPart)],
    );
    // Appended even when another instance stored the same key first: an announcement twice changes nothing.
    await appendEvents(tx, [
      {
        topic: TOPICS.signingKey,
        key: kid,
        payload: { kid, at: new Date().toISOString() },
        audience: 'everyone',
        tags: [stateTag.collection(STATE_TYPES.signingKey), stateTag.key(STATE_TYPES.signingKey, kid)],
      },
    ]);
  });
}

function parseConfiguredKey(raw: string): JWK {
  let jwk: JWK;
  try {
    jwk = JSON.parse(raw) as JWK;
  } catch {
    throw new Error('QUOTE_SIGNING_KEY: not valid JSON (expected an Ed25519 private JWK)');
  }
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.d !== 'string' || typeof jwk.x !== 'string') {
    throw new Error('QUOTE_SIGNING_KEY: expected an Ed25519 private JWK ({"kty":"OKP","crv":"Ed25519","x":..,"d":..})');
  }
  return { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d };
}
