/*
 * The stale-read check of `npm run bench -- cache`. It is told every write the workload sends (when it was
 * sent, when its answer arrived and whether it succeeded) and judges each read by facts that only grow, so a
 * stale answer is unambiguous:
 *
 * - a tenant's ledger count (`bookings { totalCount }`) is at least the number of its bookings whose confirm
 *   was acknowledged before the read's horizon (bookings are never deleted, and the tenants are new to the run);
 * - such a booking is on the ledger's first page when fewer than a page of the tenant's other confirms can be
 *   newer than it (sent after it, or still unanswered when it was sent);
 * - a booking whose completion was acknowledged before the horizon reads COMPLETED (on the ledger, and by id
 *   with its tracking);
 * - a booking whose confirm was acknowledged before the horizon is found by id;
 * - a machine whose last write (a confirm or a completion; a quote lapses on its own) was acknowledged before
 *   the horizon, with no other write to it sent since, reads IN_USE or AVAILABLE accordingly.
 *
 * A read's horizon is its start less LAG (every write acknowledged by then must show). A read that carried
 * its writer's state position is also judged with LAG 0 against what that position covers: the writer's own
 * writes up to the one that gave the position, and every write acknowledged before that one was sent.
 * Times are milliseconds on one monotonic clock (the load generator's `performance.now()`).
 */

export type WriteKind = 'quote' | 'confirm' | 'complete';

export interface WriteRecord {
  readonly id: number;
  /** The workload's client that sent it. */
  readonly client: number;
  readonly tenant: string;
  readonly kind: WriteKind;
  readonly machines: readonly string[];
  /** The booking completed, or the booking a confirm made (known once acknowledged). */
  bookingId: string | null;
  readonly sentAt: number;
  /** When its answer arrived, success or failure; null while in flight. */
  finishedAt: number | null;
  ok: boolean;
  /** Never answered (timed out, connection lost): whether and when it took effect is unknown. */
  unresolved: boolean;
}

/** What a read answered, reduced to what the facts need. */
export type ReadAnswer =
  | { kind: 'bookings'; first: number; totalCount: number; edges: readonly { id: string; status: string }[] }
  | { kind: 'delivery'; bookingId: string; booking: { status: string; trackingStatus: string } | null }
  | { kind: 'machines'; machines: readonly { id: string; status: string }[] }
  | { kind: 'fleet' };

export interface ReadObservation {
  client: number;
  tenant: string;
  startedAt: number;
  endedAt: number;
  /** The write whose state position the read carried, if any. */
  token: WriteRecord | null;
  answer: ReadAnswer;
}

export interface Verdict {
  /** Facts checked with the LAG horizon. */
  facts: number;
  /** What the read got wrong with the LAG horizon (empty: not stale). */
  violations: string[];
  /** With its writer's state position at LAG 0; null for a read that carried none. */
  tokenViolations: string[] | null;
}

/**
 * Which acknowledged writes a read must show: every one acknowledged before `before`, and those acknowledged
 * by `upTo` that `also` accepts.
 */
interface Horizon {
  before: number;
  upTo: number;
  also: (w: WriteRecord) => boolean;
}

const must = (h: Horizon, w: WriteRecord) => w.ok && w.finishedAt !== null && (w.finishedAt < h.before || (w.finishedAt <= h.upTo && h.also(w)));

/** One tenant's confirms: in the order sent, and the acknowledged ones in the order acknowledged. */
interface TenantWrites {
  sent: WriteRecord[];
  acked: WriteRecord[];
  /** Those in flight or never answered. */
  unsettled: Set<WriteRecord>;
  /** Per confirm: how many of the tenant's confirms sent before it were unanswered when it was sent (once final). */
  overlap: Map<WriteRecord, number>;
}

/** The first index of `items` (ascending by `key`) whose key is at least `x`, or above it when `above`. */
function bound<T>(items: readonly T[], x: number, key: (t: T) => number, above = false): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const k = key(items[mid]!);
    if (k < x || (above && k === x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const ackedAt = (w: WriteRecord) => w.finishedAt!;

export class StaleChecker {
  readonly #tenants = new Map<string, TenantWrites>();
  readonly #machines = new Map<string, WriteRecord[]>();
  readonly #completes = new Map<string, WriteRecord[]>();
  readonly #confirms = new Map<string, WriteRecord>();
  /** Per machine, when the first write to it that was never answered was sent. */
  readonly #unresolvedSince = new Map<string, number>();
  #nextId = 1;

  /**
   * @param lagMs how long after its acknowledgement a write must show in every read (LAG).
   * @param maxRequestMs the longest a request can be in flight before it counts as unresolved (the client's timeout).
   */
  constructor(
    readonly lagMs: number,
    private readonly maxRequestMs: number,
  ) {}

  /** A write is sent; the record is updated by `finished` or `gaveUp`. */
  sent(write: { client: number; tenant: string; kind: WriteKind; machines: readonly string[]; bookingId?: string }, at: number): WriteRecord {
    const record: WriteRecord = { id: this.#nextId++, bookingId: null, ...write, sentAt: at, finishedAt: null, ok: false, unresolved: false };
    for (const machine of write.machines) this.#listOf(this.#machines, machine).push(record);
    if (write.kind === 'confirm') {
      const tenant = this.#tenant(write.tenant);
      tenant.sent.push(record);
      tenant.unsettled.add(record);
    }
    if (write.kind === 'complete' && write.bookingId) this.#listOf(this.#completes, write.bookingId).push(record);
    return record;
  }

  /** Its answer arrived: `ok` with the booking a confirm made, or a failure (which changed nothing, or did so before now). */
  finished(record: WriteRecord, at: number, ok: boolean, bookingId?: string): void {
    record.finishedAt = at;
    record.ok = ok;
    if (record.kind === 'confirm') this.#tenant(record.tenant).unsettled.delete(record);
    if (!ok || record.kind !== 'confirm') return;
    if (!bookingId) throw new Error('an acknowledged confirm names its booking');
    record.bookingId = bookingId;
    this.#confirms.set(bookingId, record);
    const acked = this.#tenant(record.tenant).acked;
    acked.splice(bound(acked, at, ackedAt, true), 0, record);
  }

  /** No answer came (timed out, connection lost). */
  gaveUp(record: WriteRecord, at: number): void {
    record.finishedAt = at;
    record.unresolved = true;
    for (const machine of record.machines) this.#unresolvedSince.set(machine, Math.min(record.sentAt, this.#unresolvedSince.get(machine) ?? Infinity));
  }

  /** The facts the read's answer must hold, with LAG and, when it carried a state position, with that at LAG 0. */
  check(read: ReadObservation): Verdict {
    const lag: Horizon = { before: read.startedAt - this.lagMs, upTo: -Infinity, also: () => false };
    const { facts, violations } = this.#judge(read, lag);
    const token = read.token;
    if (!token?.ok || token.finishedAt === null) return { facts, violations, tokenViolations: null };
    const own: Horizon = { before: token.sentAt, upTo: token.finishedAt, also: (w) => w.client === read.client };
    return { facts, violations, tokenViolations: this.#judge(read, own).violations };
  }

  #judge(read: ReadObservation, h: Horizon): { facts: number; violations: string[] } {
    const out = { facts: 0, violations: [] as string[] };
    const fact = (holds: boolean, what: () => string) => {
      out.facts++;
      if (!holds) out.violations.push(what());
    };
    const { answer } = read;
    if (answer.kind === 'bookings') this.#ledger(read, answer, h, fact);
    else if (answer.kind === 'delivery') this.#delivery(answer, h, fact);
    else if (answer.kind === 'machines') this.#machineStatuses(read, answer, h, fact);
    return out;
  }

  #ledger(read: ReadObservation, answer: Extract<ReadAnswer, { kind: 'bookings' }>, h: Horizon, fact: Fact): void {
    const tenant = this.#tenant(read.tenant);
    // Every confirm acknowledged before `before`, and those up to `upTo` that `also` accepts.
    const surely = bound(tenant.acked, h.before, ackedAt);
    const required = surely + tenant.acked.slice(surely, bound(tenant.acked, h.upTo, ackedAt, true)).filter(h.also).length;
    fact(answer.totalCount >= required, () => `bookings of ${read.tenant}: totalCount ${answer.totalCount}, ${required} acknowledged`);
    const shown = new Map(answer.edges.map((e) => [e.id, e.status]));
    // The newest confirms sent before the read ended, newest first: a booking is owed a place on the page when
    // fewer than a page of the others can be newer (sent after it, or unanswered when it was sent).
    const end = bound(tenant.sent, read.endedAt, (w) => w.sentAt);
    for (let i = end - 1, sentAfter = 0; i >= 0 && sentAfter < answer.first; i--, sentAfter++) {
      const booking = tenant.sent[i]!;
      if (!must(h, booking) || sentAfter + this.#overlap(tenant, i, read.endedAt) >= answer.first) continue;
      fact(shown.has(booking.bookingId!), () => `bookings of ${read.tenant}: ${booking.bookingId} (acknowledged) not on the first page`);
    }
    for (const [id, status] of shown) {
      if (this.#completed(id, h)) fact(status === 'COMPLETED', () => `bookings of ${read.tenant}: ${id} reads ${status}, its completion acknowledged`);
    }
  }

  /** How many of the tenant's confirms sent before `sent[i]` were still unanswered when it was sent. */
  #overlap(tenant: TenantWrites, i: number, now: number): number {
    const booking = tenant.sent[i]!;
    const known = tenant.overlap.get(booking);
    if (known !== undefined) return known;
    // Those sent within a request's longest life before it: unanswered when it was sent, or answered after.
    const window = booking.sentAt - this.maxRequestMs;
    let count = 0;
    for (let j = i - 1; j >= 0 && tenant.sent[j]!.sentAt >= window; j--) {
      const x = tenant.sent[j]!;
      if (x.finishedAt === null || x.unresolved || x.finishedAt >= booking.sentAt) count++;
    }
    // Those sent earlier had their answer before it was sent, unless they never had one.
    for (const x of tenant.unsettled) if (x.sentAt < window) count++;
    // Final once every earlier confirm has had its answer or its timeout.
    if (now > booking.sentAt + this.maxRequestMs) tenant.overlap.set(booking, count);
    return count;
  }

  #delivery(answer: Extract<ReadAnswer, { kind: 'delivery' }>, h: Horizon, fact: Fact): void {
    const confirm = this.#confirms.get(answer.bookingId);
    if (confirm && must(h, confirm)) fact(answer.booking !== null, () => `booking ${answer.bookingId}: not found, its confirm acknowledged`);
    if (answer.booking && this.#completed(answer.bookingId, h)) {
      const { status, trackingStatus } = answer.booking;
      fact(
        status === 'COMPLETED' && trackingStatus === 'COMPLETED',
        () => `booking ${answer.bookingId}: reads ${status}, tracking ${trackingStatus}, its completion acknowledged`,
      );
    }
  }

  #machineStatuses(read: ReadObservation, answer: Extract<ReadAnswer, { kind: 'machines' }>, h: Horizon, fact: Fact): void {
    for (const { id, status } of answer.machines) {
      const writes = this.#machines.get(id);
      if (!writes) continue;
      const sentBefore = bound(writes, read.endedAt, (w) => w.sentAt);
      const last = writes[sentBefore - 1];
      // Unambiguous only when the last write sent before the read ended is one that must show, and no write
      // to the machine is of unknown effect; a quote's reservation lapses on its own.
      if (!last || !must(h, last) || last.kind === 'quote' || (this.#unresolvedSince.get(id) ?? Infinity) < read.endedAt) continue;
      const expected = last.kind === 'confirm' ? 'IN_USE' : 'AVAILABLE';
      fact(status === expected, () => `machine ${id}: reads ${status}, ${expected} since its ${last.kind} was acknowledged`);
    }
  }

  #completed(bookingId: string, h: Horizon): boolean {
    return (this.#completes.get(bookingId) ?? []).some((w) => must(h, w));
  }

  #tenant(name: string): TenantWrites {
    let t = this.#tenants.get(name);
    if (!t) this.#tenants.set(name, (t = { sent: [], acked: [], unsettled: new Set(), overlap: new Map() }));
    return t;
  }

  #listOf(map: Map<string, WriteRecord[]>, key: string): WriteRecord[] {
    let list = map.get(key);
    if (!list) map.set(key, (list = []));
    return list;
  }
}

type Fact = (holds: boolean, what: () => string) => void;

/**
 * The check counts what it should: a synthetic stale read of each kind is counted, and the same reads within
 * LAG, or made fresh, are not. Throws naming the case that went wrong; run before a benchmark measures.
 */
export function selfCheck(): void {
  const checker = new StaleChecker(1000, 10_000);
  const quote = checker.sent({ client: 1, tenant: 't', kind: 'quote', machines: ['EQ-100'] }, 0);
  checker.finished(quote, 5, true);
  const confirm = checker.sent({ client: 1, tenant: 't', kind: 'confirm', machines: ['EQ-100'] }, 10);
  checker.finished(confirm, 20, true, 'BK-000000000001');
  // Client 2 reads without a position; client 1, the writer, with the position of its confirm.
  const read = (startedAt: number, answer: ReadAnswer, token: WriteRecord | null = null) =>
    checker.check({ client: token ? 1 : 2, tenant: 't', startedAt, endedAt: startedAt + 5, token, answer });
  const empty: ReadAnswer = { kind: 'bookings', first: 50, totalCount: 0, edges: [] };
  const cases: [string, boolean][] = [
    ['an empty ledger after LAG is stale', read(1100, empty).violations.length === 2],
    ['an empty ledger within LAG is not', read(900, empty).violations.length === 0],
    [
      'the booking on the ledger after LAG is fresh',
      read(1100, { ...empty, totalCount: 1, edges: [{ id: 'BK-000000000001', status: 'CONFIRMED' }] }).violations.length === 0,
    ],
    [
      'a machine still available after its confirm is stale',
      read(1100, { kind: 'machines', machines: [{ id: 'EQ-100', status: 'AVAILABLE' }] }).violations.length === 1,
    ],
    ['an empty ledger at once with the position of the write is stale', read(25, empty, confirm).tokenViolations?.length === 2],
  ];
  const wrong = cases.filter(([, right]) => !right).map(([what]) => what);
  if (wrong.length > 0) throw new Error(`the stale-read check is wrong: ${wrong.join('; ')}`);
}
