import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { hoursFromNow, rest } from '../support/http.js';
import { backends, dropSchema, startTestServer, type Backend } from '../support/server.js';

describe.each(backends)('state survives a restart (%s)', (backend: Backend) => {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-'));
  const schema = `t_restart_${randomBytes(4).toString('hex')}`;
  const start = () => startTestServer({ backend, env: { DATA_DIR: dir }, ...(backend === 'postgres' ? { schema } : {}) });

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

describe('a backup of a stopped PGlite data directory (docs/operations.md, "Data directories and backups")', () => {
  const root = mkdtempSync(join(tmpdir(), 'ops-backup-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('stopped cleanly, archived with tar and unpacked elsewhere, serves the same state', async () => {
    const data = join(root, 'data');
    const restored = join(root, 'restored');
    const archive = join(root, 'ops.tar.gz');
    const first = await startTestServer({ backend: 'pglite', env: { DATA_DIR: data } });
    const q = await rest(first.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-007'],
      location_id: 'LOC-002',
      start_time: hoursFromNow(5),
      duration_hours: 3,
    });
    const b = await rest(first.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Backup BV' });
    expect(b.status).toBe(200);
    const keys = await rest(first.url, 'GET', '/rental/pricing/keys');
    await first.close();
    // A clean stop releases the directory: the lock is gone before the copy is taken.
    expect(existsSync(join(data, 'ops-supergraph.lock'))).toBe(false);
    execFileSync('tar', ['-C', data, '-czf', archive, '.']);
    mkdirSync(restored);
    execFileSync('tar', ['-C', restored, '-xzf', archive]);

    const second = await startTestServer({ backend: 'pglite', env: { DATA_DIR: restored } });
    const ledger = await rest(second.url, 'GET', '/rental/bookings');
    expect(ledger.body['bookings'].map((x: { booking_id: string; customer_name: string }) => [x.booking_id, x.customer_name])).toEqual([
      [b.body['booking_id'], 'Backup BV'],
    ]);
    expect((await rest(second.url, 'GET', '/rental/pricing/keys')).body).toEqual(keys.body);
    expect((await rest(second.url, 'GET', '/rental/fleet/summary')).body).toMatchObject({ in_use: 1 });
    await second.close();
  });
});
