import { describe, expect, it } from 'vitest';
import { selfCheck, StaleChecker, type ReadAnswer, type WriteRecord } from '../../../bench/cache/stale.js';

/*
 * The stale-read check of `npm run bench -- cache` counts what it should: a read that misses an acknowledged
 * write after LAG is stale; the same read within LAG, or while the write is in flight, or where a write of
 * unknown effect leaves the answer open, is not counted; a read with its writer's state position is judged
 * at LAG 0 against that writer's own writes.
 */

const LAG = 1000;
const WRITER = 1;
const READER = 2;

/** A tenant `t` whose writer quoted EQ-100 and confirmed it into BK-000000000001 (acknowledged at 20 ms). */
function booked() {
  const checker = new StaleChecker(LAG, 10_000);
  const quote = checker.sent({ client: WRITER, tenant: 't', kind: 'quote', machines: ['EQ-100'] }, 0);
  checker.finished(quote, 5, true);
  const confirm = checker.sent({ client: WRITER, tenant: 't', kind: 'confirm', machines: ['EQ-100'] }, 10);
  checker.finished(confirm, 20, true, 'BK-000000000001');
  const read = (startedAt: number, answer: ReadAnswer, options: { client?: number; token?: WriteRecord; tenant?: string } = {}) =>
    checker.check({ client: options.client ?? READER, tenant: options.tenant ?? 't', startedAt, endedAt: startedAt + 5, token: options.token ?? null, answer });
  return { checker, confirm, read };
}

const ledger = (totalCount: number, edges: { id: string; status: string }[] = []): ReadAnswer => ({ kind: 'bookings', first: 50, totalCount, edges });
const machines = (status: string): ReadAnswer => ({ kind: 'machines', machines: [{ id: 'EQ-100', status }] });

describe('the stale-read check of the cache benchmark', () => {
  it('counts a ledger without an acknowledged booking after LAG, and not within LAG', () => {
    const { read } = booked();
    expect(read(1100, ledger(0)).violations).toEqual([
      'bookings of t: totalCount 0, 1 acknowledged',
      'bookings of t: BK-000000000001 (acknowledged) not on the first page',
    ]);
    expect(read(900, ledger(0)).violations).toEqual([]);
    expect(read(1100, ledger(1, [{ id: 'BK-000000000001', status: 'CONFIRMED' }]))).toMatchObject({ facts: 2, violations: [], tokenViolations: null });
    // Another tenant's ledger owes nothing.
    expect(read(1100, ledger(0), { tenant: 'u' }).violations).toEqual([]);
  });

  it('does not ask for a booking on the first page when a page of others may be newer', () => {
    const { checker, read } = booked();
    for (let i = 0; i < 50; i++) {
      const other = checker.sent({ client: WRITER, tenant: 't', kind: 'confirm', machines: [] }, 30 + i);
      checker.finished(other, 30 + i + 0.5, true, `BK-1${String(i).padStart(11, '0')}`);
    }
    // Fifty newer bookings fill the page: the count must still hold them all, the page need not hold the first.
    expect(read(2000, ledger(51)).violations).toEqual(
      Array.from({ length: 50 }, (_, i) => `bookings of t: BK-1${String(49 - i).padStart(11, '0')} (acknowledged) not on the first page`),
    );
    expect(read(2000, ledger(50)).violations).toContain('bookings of t: totalCount 50, 51 acknowledged');
  });

  it('counts a completed booking read as confirmed, on the ledger and by id, after LAG', () => {
    const { checker, read } = booked();
    const complete = checker.sent({ client: WRITER, tenant: 't', kind: 'complete', machines: ['EQ-100'], bookingId: 'BK-000000000001' }, 100);
    const delivery = (status: string): ReadAnswer => ({ kind: 'delivery', bookingId: 'BK-000000000001', booking: { status, trackingStatus: status } });
    // In flight: nothing owed yet.
    expect(read(1500, delivery('CONFIRMED')).violations).toEqual([]);
    checker.finished(complete, 120, true);
    expect(read(1500, delivery('CONFIRMED')).violations).toEqual(['booking BK-000000000001: reads CONFIRMED, tracking CONFIRMED, its completion acknowledged']);
    expect(read(1500, delivery('COMPLETED')).violations).toEqual([]);
    expect(read(1500, ledger(1, [{ id: 'BK-000000000001', status: 'CONFIRMED' }])).violations).toEqual([
      'bookings of t: BK-000000000001 reads CONFIRMED, its completion acknowledged',
    ]);
    expect(read(1500, { kind: 'delivery', bookingId: 'BK-000000000001', booking: null }).violations).toEqual([
      'booking BK-000000000001: not found, its confirm acknowledged',
    ]);
  });

  it("counts a machine's status only where its last write is acknowledged and nothing of unknown effect touched it", () => {
    const { checker, read } = booked();
    expect(read(1100, machines('AVAILABLE')).violations).toEqual(['machine EQ-100: reads AVAILABLE, IN_USE since its confirm was acknowledged']);
    expect(read(1100, machines('IN_USE')).violations).toEqual([]);
    // A completion in flight: either status may be read.
    const complete = checker.sent({ client: WRITER, tenant: 't', kind: 'complete', machines: ['EQ-100'], bookingId: 'BK-000000000001' }, 1200);
    expect(read(1300, machines('IN_USE')).violations).toEqual([]);
    expect(read(1300, machines('AVAILABLE')).violations).toEqual([]);
    // Never answered: the machine's status is open from then on.
    checker.gaveUp(complete, 11_200);
    expect(read(13_000, machines('IN_USE')).facts).toBe(0);
  });

  it("judges a read with its writer's state position at LAG 0, against the writer's own writes", () => {
    const { confirm, read } = booked();
    const stale = read(25, ledger(0), { client: WRITER, token: confirm });
    // Within LAG for everyone, but not for the writer that sent its position.
    expect(stale.violations).toEqual([]);
    expect(stale.tokenViolations).toEqual([
      'bookings of t: totalCount 0, 1 acknowledged',
      'bookings of t: BK-000000000001 (acknowledged) not on the first page',
    ]);
    expect(read(25, ledger(1, [{ id: 'BK-000000000001', status: 'CONFIRMED' }]), { client: WRITER, token: confirm }).tokenViolations).toEqual([]);
  });

  it('passes its own self-check', () => {
    expect(() => selfCheck()).not.toThrow();
  });
});
