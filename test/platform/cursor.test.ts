import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { sequenceCursor } from '../../platform/cursor.js';

describe('sequence cursors', () => {
  const cursor = sequenceCursor('booking');

  it('decode what they encode', () => {
    expect(cursor.encode('42')).toBe(Buffer.from('booking:42').toString('base64url'));
    expect(cursor.decode(cursor.encode('42'))).toBe('42');
    expect(cursor.decode(cursor.encode('999999999999999999'))).toBe('999999999999999999');
  });

  it('refuse every other text as a 400 on `after`: another kind, a leading zero, a second spelling, nonsense', () => {
    const refused = (text: string) => {
      try {
        cursor.decode(text);
        return null;
      } catch (error) {
        return error instanceof GraphQLError ? error.extensions['fields'] : error;
      }
    };
    const problem = [{ field: 'after', message: 'is not a cursor returned by this API' }];
    expect(refused(sequenceCursor('run').encode('42'))).toEqual(problem);
    expect(refused(Buffer.from('booking:042').toString('base64url'))).toEqual(problem);
    // Standard base64 with padding names the same bytes, but it is not the text this API hands out.
    expect(refused(Buffer.from('booking:42').toString('base64'))).toEqual(problem);
    expect(refused('nonsense')).toEqual(problem);
    expect(refused(Buffer.from('booking:1234567890123456789').toString('base64url'))).toEqual(problem);
  });
});
