import { invalidInput } from './validate.js';

/**
 * The page cursors of a connection ordered by a sequence number: `<kind>:<seq>` in base64url, opaque to
 * clients. A cursor decodes only when it is the exact text this API hands out (no leading zeros, no other
 * base64url spelling of the same bytes), so a client cannot page from a position it made up; anything else
 * is a 400 on the `after` argument.
 */
export function sequenceCursor(kind: string): { encode(seq: string): string; decode(cursor: string): string } {
  const encode = (seq: string) => Buffer.from(`${kind}:${seq}`).toString('base64url');
  const pattern = new RegExp(`^${kind}:([1-9]\\d{0,17})$`);
  return {
    encode,
    decode(cursor) {
      const match = pattern.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
      if (!match || encode(match[1]!) !== cursor) throw invalidInput([{ field: 'after', message: 'is not a cursor returned by this API' }]);
      return match[1]!;
    },
  };
}
