import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export interface Authenticator {
  /** False in demo mode (no keys configured): every call is accepted. */
  readonly enabled: boolean;
  /** Checks `x-api-key: <key>` or `Authorization: Bearer <key>`. */
  verify(headers: { 'x-api-key'?: string | string[] | undefined; authorization?: string | undefined }): boolean;
  /** Checks a credential taken from elsewhere (a WebSocket connection_init payload). */
  verifyKey(key: string | undefined): boolean;
}

/**
 * Keys are kept only as SHA-256 digests and compared in constant time against every configured key,
 * so neither a match nor its position shows in the timing.
 */
export function createAuthenticator(keys: readonly string[]): Authenticator {
  const digests = keys.map(digest);
  const verifyKey = (key: string | undefined) => {
    if (digests.length === 0) return true;
    if (!key) return false;
    const presented = digest(key);
    let ok = false;
    for (const d of digests) ok = timingSafeEqual(d, presented) || ok;
    return ok;
  };
  return {
    enabled: digests.length > 0,
    verifyKey,
    verify(headers) {
      if (digests.length === 0) return true;
      return verifyKey(credentialOf(headers));
    },
  };
}

function credentialOf(headers: { 'x-api-key'?: string | string[] | undefined; authorization?: string | undefined }) {
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey.length > 0) return apiKey;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '');
  return match?.[1];
}
