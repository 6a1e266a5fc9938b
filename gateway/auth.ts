import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export interface Authenticator {
  /** False in demo mode (no keys configured): every call is accepted. */
  readonly enabled: boolean;
  /**
   * Checks `x-api-key: <key>` and `Authorization: Bearer <key>`: at least one must be sent, and every
   * key sent must be valid (a wrong key is never excused by a right one next to it).
   */
  verify(headers: { 'x-api-key'?: string | string[] | undefined; authorization?: string | undefined }): boolean;
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
    verify(headers) {
      if (digests.length === 0) return true;
      const presented = credentialsOf(headers);
      let ok = presented.length > 0;
      for (const key of presented) ok = verifyKey(key) && ok;
      return ok;
    },
  };
}

/** The keys a request presents; a header sent twice, or an empty key, counts as a wrong key. */
function credentialsOf(headers: { 'x-api-key'?: string | string[] | undefined; authorization?: string | undefined }): (string | undefined)[] {
  const keys: (string | undefined)[] = [];
  const apiKey = headers['x-api-key'];
  if (apiKey !== undefined) keys.push(typeof apiKey === 'string' && apiKey.length > 0 ? apiKey : undefined);
  const authorization = headers.authorization;
  if (authorization !== undefined && /^Bearer(\s|$)/i.test(authorization)) keys.push(/^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]);
  return keys;
}
