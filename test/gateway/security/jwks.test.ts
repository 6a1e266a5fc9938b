import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';

describe('signed quotes', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });

  it('a partner verifies a quote offline with the published JWKS', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-006', 'EQ-002'],
      location_id: 'LOC-005',
      start_time: hoursFromNow(48),
      duration_hours: 16,
    });
    expect(q.status).toBe(200);
    const jwks = createRemoteJWKSet(new URL(`${url}/rental/pricing/keys`));
    const { payload, protectedHeader } = await jwtVerify(q.body['signature'], jwks, { issuer: 'ops-supergraph/rental' });
    expect(protectedHeader.alg).toBe('EdDSA');
    expect(payload).toMatchObject({
      quote_id: q.body['quote_id'],
      machine_ids: ['EQ-002', 'EQ-006'],
      location_id: 'LOC-005',
      total: q.body['total'],
      currency: 'EUR',
      exp: Math.floor(Date.parse(q.body['expires_at']) / 1000),
    });
  });

  it('rejects a tampered quote', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-008'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(10),
      duration_hours: 3,
    });
    const [header, , signature] = (q.body['signature'] as string).split('.');
    const claims = decodeJwt(q.body['signature']);
    const cheaper = Buffer.from(JSON.stringify({ ...claims, total: 1 })).toString('base64url');
    const jwks = createRemoteJWKSet(new URL(`${url}/rental/pricing/keys`));
    await expect(jwtVerify(`${header}.${cheaper}.${signature}`, jwks)).rejects.toThrow(/signature verification failed/);
  });
});
