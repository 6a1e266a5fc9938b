import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../platform/db.js';
import { migrate } from '../../platform/migrate.js';
import { appendEvents, type OutboxEvent } from '../../platform/outbox.js';
import {
  readingOnly,
  stateExtension,
  StateTrace,
  StateWriteError,
  stateTag,
  traceRequest,
  traceStateAccess,
  unobservedWrite,
  validUntil,
  watchContext,
} from '../../platform/state-trace.js';

/*
 * The state trace on a real database (PGlite): what a read depends on, and the rule that every write to
 * state appends an event tagged with what it changed, in its transaction, or does not happen.
 */

const platformMigrations = [{ owner: 'platform', dir: fileURLToPath(new URL('../../platform/migrations/', import.meta.url)) }];

const tables = {
  demo_machines: { type: 'Machine', grain: 'everyone' },
  demo_bookings: { type: 'Booking', grain: 'tenant' },
} as const;

const machineEvent = (id: string, tags: string[]): OutboxEvent => ({ topic: 'demo.machine', key: id, payload: { id }, audience: 'everyone', tags });

describe('the state trace', () => {
  let raw: Database;
  let db: Database;
  beforeAll(async () => {
    raw = await openDatabase({});
    await migrate(raw, platformMigrations);
    await raw.exec(`
      CREATE TABLE demo_machines (id text PRIMARY KEY, status text NOT NULL);
      CREATE TABLE demo_bookings (id text PRIMARY KEY, tenant text NOT NULL);
      CREATE TABLE demo_secrets (id text PRIMARY KEY);
      INSERT INTO demo_machines VALUES ('M-1', 'available'), ('M-2', 'available');
      INSERT INTO demo_bookings VALUES ('B-1', 'acme');`);
    db = traceStateAccess(raw, tables, 'demo_', 'demo-lineage');
  });
  afterAll(async () => {
    await raw?.close();
  });

  it('refuses a write to state whose transaction appends no event tagged with its collection, and changes nothing', async () => {
    await expect(db.transaction((tx) => tx.query("UPDATE demo_machines SET status = 'in_use' WHERE id = 'M-1'"))).rejects.toThrow(StateWriteError);
    await expect(
      db.transaction(async (tx) => {
        await tx.query("UPDATE demo_machines SET status = 'in_use' WHERE id = 'M-1'");
        // Tagged with the row only: a list read would not hear of it.
        await appendEvents(tx, [machineEvent('M-1', ['Machine:M-1'])]);
      }),
    ).rejects.toThrow(/appends no event tagged Machine/);
    await expect(db.query("UPDATE demo_machines SET status = 'in_use' WHERE id = 'M-1'")).rejects.toThrow(/outside a transaction/);
    const row = await raw.query<{ status: string }>("SELECT status FROM demo_machines WHERE id = 'M-1'");
    expect(row.rows[0]!.status).toBe('available');
    const events = await raw.query('SELECT id FROM outbox');
    expect(events.rows).toEqual([]);
  });

  it('lets a tagged write through, and tells the request its position and tags; an unobserved write needs no event', async () => {
    const trace = new StateTrace();
    await traceRequest(trace, () =>
      db.transaction(async (tx) => {
        await tx.query("UPDATE demo_machines SET status = 'in_use' WHERE id = 'M-1'");
        await appendEvents(tx, [machineEvent('M-1', [stateTag.collection('Machine'), stateTag.key('Machine', 'M-1')])]);
      }),
    );
    const stored = await raw.query<{ id: string; tags: string[] }>('SELECT id::text AS id, tags FROM outbox ORDER BY outbox.id');
    expect(stored.rows.at(-1)!.tags).toEqual(['Machine', 'Machine:M-1']);
    expect(stateExtension(trace)).toEqual({ position: stored.rows.at(-1)!.id, changed: ['Machine', 'Machine:M-1'], lineage: 'demo-lineage' });
    await unobservedWrite(() => db.query("UPDATE demo_machines SET status = status WHERE id = 'M-2'"));
    // Tables that are not state (not declared) are written freely.
    await db.query("INSERT INTO demo_secrets VALUES ('s')");
  });

  it('says what a read depends on: each collection it names, narrowed where the code says which rows, the finest grain', async () => {
    const list = new StateTrace();
    await traceRequest(list, () => db.query('SELECT m.id FROM demo_machines m JOIN demo_bookings b ON b.id = m.id'));
    expect(stateExtension(list)).toEqual({ tags: ['Machine', 'Booking'], grain: 'tenant', lineage: 'demo-lineage' });

    const one = new StateTrace();
    await traceRequest(one, () => readingOnly([stateTag.key('Machine', 'M-1')], () => db.query("SELECT * FROM demo_machines WHERE id = 'M-1'")));
    expect(stateExtension(one)).toEqual({ tags: ['Machine:M-1'], grain: 'everyone', lineage: 'demo-lineage' });

    // Narrowing one read does not narrow another of the same request.
    const both = new StateTrace();
    await traceRequest(both, async () => {
      await Promise.all([
        readingOnly([stateTag.key('Machine', 'M-2')], () => db.query("SELECT * FROM demo_machines WHERE id = 'M-2'")),
        db.query('SELECT * FROM demo_machines'),
      ]);
    });
    expect(new Set(stateExtension(both)!.tags)).toEqual(new Set(['Machine:M-2', 'Machine']));

    const secret = new StateTrace();
    await traceRequest(secret, () => db.query('SELECT * FROM demo_secrets'));
    expect(stateExtension(secret)).toEqual({ uncacheable: 'reads demo_secrets, which is not declared state', lineage: 'demo-lineage' });
    const outbox = new StateTrace();
    await traceRequest(outbox, () => db.query('SELECT max(id) FROM outbox'));
    expect(stateExtension(outbox)?.uncacheable).toMatch(/outbox/);
  });

  it('keeps an answer that read the clock only as long as the code says, and one that read the caller per principal', async () => {
    const context = watchContext({ now: new Date(1_000), principal: { id: 'p', tenant: 't', scopes: [] } });
    const silent = new StateTrace();
    await traceRequest(silent, async () => {
      await db.query('SELECT * FROM demo_machines');
      return context.now;
    });
    expect(stateExtension(silent)).toEqual({ uncacheable: 'read the clock without saying until when its answer holds', lineage: 'demo-lineage' });
    const bounded = new StateTrace();
    await traceRequest(bounded, async () => {
      await db.query('SELECT * FROM demo_machines');
      validUntil(new Date(context.now.getTime() + 5_000));
      validUntil(new Date(context.now.getTime() + 9_000));
    });
    expect(stateExtension(bounded)).toEqual({ tags: ['Machine'], grain: 'everyone', validUntil: 6_000, lineage: 'demo-lineage' });
    const caller = new StateTrace();
    await traceRequest(caller, async () => {
      await db.query('SELECT * FROM demo_machines');
      return context.principal.id;
    });
    expect(stateExtension(caller)?.grain).toBe('principal');
  });
});
