import { beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow } from './support/http.js';
import { startTestServer } from './support/server.js';

/*
 * `@defer` is accepted. Its fragments are answered with the rest, in one payload (what the incremental
 * delivery specification lets a server do, and what a client that does not accept multipart/mixed gets).
 */

describe('@defer', () => {
  let url: string;
  let id: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
    const q = await gql(url, `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`, {
      input: { machineIds: ['EQ-004'], locationId: 'LOC-002', startTime: hoursFromNow(30), durationHours: 8 },
    });
    const b = await gql(url, `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Defer BV" }) { id } }`, { q: q.data!['createQuote'].id });
    id = b.data!['confirmBooking'].id;
  });

  const plain = `query($id: ID!) { booking(id: $id) { id status machines { id } deliveryForecast { q50Minutes modelVersion } } }`;

  it('deferred fragments (inline and spread, with label and if) are answered with the rest, in one payload', async () => {
    const whole = await gql(url, plain, { id });
    expect(whole.errors).toBeUndefined();
    for (const query of [
      `query($id: ID!) { booking(id: $id) { id status machines { id } ... @defer(label: "forecast") { deliveryForecast { q50Minutes modelVersion } } } }`,
      `query($id: ID!, $d: Boolean!) { booking(id: $id) { id status machines { id } ... F @defer(if: $d) } } fragment F on Booking { deliveryForecast { q50Minutes modelVersion } }`,
    ]) {
      const res = await gql(url, query, { id, d: true }, { accept: 'multipart/mixed;deferSpec=20220824, application/json' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.errors).toBeUndefined();
      expect(res.data).toEqual(whole.data);
    }
  });

  it('is refused where the specification does not allow it, with its own validation error', async () => {
    const res = await gql(url, `query($id: ID!) { booking(id: $id) @defer { id } }`, { id });
    expect(res.status).toBe(400);
    expect(res.errors?.[0]?.message).toMatch(/Directive "@defer" may not be used on FIELD/);
    expect(res.errors?.[0]?.extensions?.['code']).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});
