import { beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { backends, startTestServer, type TestServer } from '../../support/server.js';

/*
 * The ledger's totalCount is read from counts that triggers on rental_bookings keep
 * (subgraphs/rental/migrations/008_booking_counts.sql), not counted per page. Whatever writes booking rows
 * (confirmations at the same time, one statement inserting many rows, a delete), the counts stay equal to
 * count(*) per tenant, and a booking's tenant and seq, which the counts rely on, cannot change. What a
 * page answers equals what the machines' own reads and the counted rows say, on an empty page too.
 */

describe.each(backends)("the ledger's total, kept as bookings are written (%s)", (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ backend });
  });

  /** Bookings per tenant and slot, counted from the rows. */
  const counted = async () =>
    (
      await server.db.query<{ tenant: string; slot: number; n: number }>(
        'SELECT tenant, (seq % 16)::int AS slot, count(*)::int AS n FROM rental_bookings GROUP BY 1, 2 ORDER BY 1, 2',
      )
    ).rows;
  /** The same, as the triggers keep it. */
  const kept = async () =>
    (
      await server.db.query<{ tenant: string; slot: number; n: number }>(
        'SELECT tenant, slot::int AS slot, bookings::int AS n FROM rental_booking_counts WHERE bookings <> 0 ORDER BY 1, 2',
      )
    ).rows;
  const totalCount = async () => {
    // Rows are also written here behind the service (no event): the state cache is told, as an operator
    // would tell it after a hand-made change (docs/operations.md, "The state cache").
    const invalidated = await fetch(`${server.url}/admin/state-cache/invalidate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"type":"Booking"}',
    });
    expect(invalidated.status).toBe(200);
    const res = await gql(server.url, '{ bookings(first: 1) { totalCount } }');
    expect(res.errors).toBeUndefined();
    return (res.data as { bookings: { totalCount: number } }).bookings.totalCount;
  };
  /** Quotes one machine starting in `hours` and confirms it; the booking's id. */
  const book = async (machine: string, customer: string, hours: number) => {
    const q = await rest(server.url, 'POST', '/rental/pricing/quote', {
      machine_ids: [machine],
      location_id: 'LOC-002',
      start_time: hoursFromNow(hours),
      duration_hours: 8,
    });
    expect(q.status).toBe(200);
    const b = await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: customer });
    expect(b.status).toBe(200);
    return b.body['booking_id'] as string;
  };
  const all = async () => (await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM rental_bookings')).rows[0]!.n;
  const columns = async (table: string) =>
    (
      await server.db.query<{ name: string }>(
        'SELECT column_name AS name FROM information_schema.columns WHERE table_name = $1 AND table_schema = current_schema() ORDER BY ordinal_position',
        [table],
      )
    ).rows.map((r) => r.name);

  it('equals count(*) per tenant after concurrent confirmations, a many-row insert and a delete', async () => {
    const before = await all();
    expect(await totalCount()).toBe(before);

    // Twelve bookings confirmed at the same time (consecutive seqs: several slots).
    const machines = Array.from({ length: 12 }, (_, i) => `EQ-${String(i + 1).padStart(3, '0')}`);
    const confirmed = await Promise.all(machines.map((id) => book(id, `Teller ${id}`, 6)));
    expect(new Set(confirmed).size).toBe(12);
    expect(await totalCount()).toBe(before + 12);
    expect(await kept()).toEqual(await counted());

    // One statement inserting a copy of every booking (and its quote) for another tenant.
    const copy = (cols: string[], as: Record<string, string>) => cols.map((c) => as[c] ?? c).join(', ');
    const quoteColumns = await columns('rental_quotes');
    await server.db.query(
      `INSERT INTO rental_quotes (${quoteColumns.join(', ')})
       SELECT ${copy(quoteColumns, { id: `md5(id::text || 'copy')::uuid`, tenant: `'tenant-copy'` })}
       FROM rental_quotes WHERE id IN (SELECT quote_id FROM rental_bookings)`,
    );
    const bookingColumns = (await columns('rental_bookings')).filter((c) => c !== 'seq');
    await server.db.query(
      `INSERT INTO rental_bookings (${bookingColumns.join(', ')})
       SELECT ${copy(bookingColumns, { id: `id || '-copy'`, quote_id: `md5(quote_id::text || 'copy')::uuid`, tenant: `'tenant-copy'` })}
       FROM rental_bookings`,
    );
    expect(await all()).toBe(2 * (before + 12));
    expect(await totalCount()).toBe(2 * (before + 12));
    expect(await kept()).toEqual(await counted());
    expect((await kept()).filter((r) => r.tenant === 'tenant-copy').reduce((s, r) => s + r.n, 0)).toBe(before + 12);

    // A delete of some of them.
    const deleted = await server.db.query(`DELETE FROM rental_bookings WHERE tenant = 'tenant-copy' AND seq % 3 = 0`);
    expect(deleted.rowCount).toBeGreaterThan(0);
    expect(await totalCount()).toBe(2 * (before + 12) - deleted.rowCount);
    expect(await kept()).toEqual(await counted());
  });

  it("refuses to change a booking's tenant or seq, and lets every other update through", async () => {
    const row = (await server.db.query<{ id: string; tenant: string }>('SELECT id, tenant FROM rental_bookings ORDER BY seq LIMIT 1')).rows[0]!;
    await expect(server.db.query(`UPDATE rental_bookings SET tenant = 'someone-else' WHERE id = $1`, [row.id])).rejects.toThrow(
      /a booking's tenant and seq never change/,
    );
    await expect(server.db.query('UPDATE rental_bookings SET seq = seq + 100000 WHERE id = $1', [row.id])).rejects.toThrow(
      /a booking's tenant and seq never change/,
    );
    // Naming the columns with their own values changes nothing, and passes.
    const same = await server.db.query('UPDATE rental_bookings SET tenant = tenant, customer_name = customer_name WHERE id = $1', [row.id]);
    expect(same.rowCount).toBe(1);
    expect((await server.db.query<{ tenant: string }>('SELECT tenant FROM rental_bookings WHERE id = $1', [row.id])).rows[0]!.tenant).toBe(row.tenant);
    expect(await kept()).toEqual(await counted());
  });

  it('answers each page with the machines as read one by one and the total as counted, past the last page too', async () => {
    // A booking made now, on a machine that was free: the page shows the machine as the booking left it.
    const free = (await server.db.query<{ id: string }>(`SELECT id FROM rental_machines WHERE status = 'available' ORDER BY id LIMIT 1`)).rows[0]!.id;
    await book(free, 'Teller page', 30);
    const page = await gql(
      server.url,
      '{ bookings(first: 50) { totalCount pageInfo { endCursor } edges { node { id machines { id name category hourlyRate status depot { id } } } } } }',
    );
    expect(page.errors).toBeUndefined();
    const ledger = (
      page.data as { bookings: { totalCount: number; pageInfo: { endCursor: string }; edges: { node: { id: string; machines: { id: string }[] } }[] } }
    ).bookings;
    expect(ledger.totalCount).toBe(await all());
    expect(ledger.edges.length).toBeGreaterThan(12);
    const ids = [...new Set(ledger.edges.flatMap((e) => e.node.machines.map((m) => m.id)))];
    expect(ids).toContain(free);
    for (const id of ids) {
      const one = await gql(server.url, 'query M($id: ID!) { machine(id: $id) { id name category hourlyRate status depot { id } } }', { id });
      expect(one.errors).toBeUndefined();
      const seen = ledger.edges.flatMap((e) => e.node.machines).filter((m) => m.id === id);
      for (const m of seen) expect(m).toEqual((one.data as { machine: unknown }).machine);
    }
    expect(ledger.edges.flatMap((e) => e.node.machines).find((m) => m.id === free)).toMatchObject({ status: 'IN_USE' });
    // Each booking's machines in the order the booking lists them.
    const listed = await server.db.query<{ id: string; machines: string[] }>('SELECT id, machine_ids AS machines FROM rental_bookings');
    const byBooking = new Map(listed.rows.map((r) => [r.id, r.machines]));
    for (const e of ledger.edges) expect(e.node.machines.map((m) => m.id)).toEqual(byBooking.get(e.node.id));

    // Past the last booking the page is empty, and still says how many there are.
    let after: string | null = ledger.pageInfo.endCursor;
    for (;;) {
      type Page = { bookings: { totalCount: number; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
      const next = await gql<Page>(
        server.url,
        'query P($after: String) { bookings(first: 50, after: $after) { totalCount pageInfo { hasNextPage endCursor } } }',
        {
          after,
        },
      );
      expect(next.errors).toBeUndefined();
      const b: Page['bookings'] = next.data!.bookings;
      expect(b.totalCount).toBe(await all());
      if (!b.pageInfo.hasNextPage) {
        const past = await gql(server.url, 'query P($after: String) { bookings(first: 5, after: $after) { totalCount edges { cursor } } }', {
          after: b.pageInfo.endCursor ?? after,
        });
        expect(past.data).toEqual({ bookings: { totalCount: await all(), edges: [] } });
        break;
      }
      after = b.pageInfo.endCursor;
    }
  });
});
