import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { hoursFromNow, rest } from './support/http.js';
import { backends, dropSchema, startTestServer, type Backend } from './support/server.js';

describe.each(backends)('state survives a restart (%s)', (backend: Backend) => {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-'));
  const schema = `t_restart_${randomBytes(4).toString('hex')}`;
  const start = () =>
    startTestServer({ backend, env: { DATA_DIR: dir }, ...(backend === 'postgres' ? { schema } : {}) });

  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    if (backend === 'postgres') await dropSchema(schema);
  });

  it('keeps fleet state, quotes, bookings, tracking and the signing key', async () => {
    const first = await start();
    const q = await rest(first.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-014', 'EQ-015'],
      location_id: 'LOC-004',
      start_time: hoursFromNow(3),
      duration_hours: 5,
    });
    expect(q.status).toBe(200);
    const b = await rest(first.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Persist BV' });
    const held = await rest(first.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-001'],
      location_id: 'LOC-004',
      start_time: hoursFromNow(3),
      duration_hours: 5,
    });
    const keysBefore = await rest(first.url, 'GET', '/rental/pricing/keys');
    const trackBefore = await rest(first.url, 'GET', `/rental/booking/${b.body['booking_id']}/track`);
    await first.close();

    const second = await start();
    const summary = await rest(second.url, 'GET', '/rental/fleet/summary');
    expect(summary.body).toMatchObject({ in_use: 2, reserved: 1, available: 12 });
    const ledger = await rest(second.url, 'GET', '/rental/bookings');
    expect(ledger.body['bookings'][0]).toMatchObject({ booking_id: b.body['booking_id'], customer_name: 'Persist BV', status: 'confirmed' });
    const keysAfter = await rest(second.url, 'GET', '/rental/pricing/keys');
    expect(keysAfter.body).toEqual(keysBefore.body);
    const trackAfter = await rest(second.url, 'GET', `/rental/booking/${b.body['booking_id']}/track`);
    expect(trackAfter.body['eta']).toBe(trackBefore.body['eta']);
    expect(trackAfter.body['legs']).toEqual(trackBefore.body['legs'].map((l: Record<string, unknown>) => ({ ...l })));
    // The quote made before the restart can still be confirmed after it.
    const late = await rest(second.url, 'POST', '/rental/booking/confirm', { quote_id: held.body['quote_id'], customer_name: 'After Restart' });
    expect(late.status).toBe(200);
    await second.close();
  });
});
