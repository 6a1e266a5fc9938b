import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import { describe, expect, it } from 'vitest';
import type { GatewayContext, StatePositions } from '../../../gateway/pipeline/context.js';
import { StateCache, type StateCacheOptions } from '../../../gateway/sources/state-cache.js';
import type { StoredEvent } from '../../../platform/event-hub.js';
import type { Principal } from '../../../platform/principal.js';
import type { StateExtension } from '../../../platform/state-trace.js';
import { until } from '../../support/wait.js';

/*
 * The state cache against a subgraph stand-in whose answers say what they read (`extensions.state`, as every
 * subgraph's do) and an event log stand-in whose position the test moves: the keys, the evictions, the
 * fence, the consumer's health and read-your-writes, each judged by what is fetched and what is served.
 */

const MACHINES = 'query Q__rental__0 { machines { id status } }';
const BOOKINGS = 'query Q__rental__1 { bookings(first: 10) { edges { node { id } } } }';

const alice: Principal = { id: 'alice', tenant: 'acme', scopes: ['fleet:read', 'rental:read'] };
const bob: Principal = { id: 'bob', tenant: 'acme', scopes: ['rental:read', 'fleet:read'] };
const carol: Principal = { id: 'carol', tenant: 'globex', scopes: ['fleet:read', 'rental:read'] };
const operator: Principal = { id: 'ops', tenant: 'acme', scopes: ['ops:admin', 'fleet:read', 'rental:read'] };

function fetchOf(query: string, principal: Principal, positions: StatePositions = { asked: null, written: null }) {
  const context: GatewayContext = { headers: {}, principal, client: { name: null, version: null }, statePositions: positions };
  return { request: { query, variables: {} }, context, incomingRequestContext: {} } as unknown as GraphQLDataSourceProcessOptions<GatewayContext>;
}

/** A log whose newest id and read position the test sets; `wake` reads up to the newest unless held. */
function logStandIn() {
  const log = { newest: 0n, delivered: 0n, held: false, wakes: 0 };
  const options = {
    newest: async () => log.newest,
    delivered: () => log.delivered,
    wake: async () => {
      log.wakes += 1;
      if (!log.held) log.delivered = log.newest;
    },
  };
  return { log, options };
}

/** A subgraph stand-in: counts calls; each answer says it read `state`; `gate` holds an answer until released. */
function subgraph(state: (query: string, principal: Principal) => StateExtension) {
  let calls = 0;
  let gate: Promise<void> | null = null;
  const source: GraphQLDataSource<GatewayContext> = {
    process: async (options) => {
      calls += 1;
      const n = calls;
      if (gate) await gate;
      const principal = options.context.principal;
      return { data: { n, who: principal.id }, extensions: { state: { lineage: LINEAGE, ...state(options.request.query ?? '', principal) } } };
    },
  };
  return {
    source,
    calls: () => calls,
    hold(): () => void {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = null;
        release();
      };
    },
  };
}

const LINEAGE = '5a0c2a4e-1f0b-4c53-9d0a-3f1f7f1e2b11';

const fleetRead = (): StateExtension => ({ tags: ['Machine'], grain: 'everyone' });
const tenantRead = (_q: string, p: Principal): StateExtension => ({ tags: [`Booking@${p.tenant}`], grain: 'tenant' });

async function started(overrides: Partial<StateCacheOptions> = {}) {
  const { log, options } = logStandIn();
  const cache = new StateCache({
    maxBytes: 1 << 20,
    tenantShare: 0.25,
    maxLagMs: 60_000,
    waitMs: 200,
    maxAgeMs: 60_000,
    lineage: LINEAGE,
    ...options,
    ...overrides,
  });
  await cache.probe();
  return { cache, log };
}

const event = (id: number, tags: string[]): StoredEvent => ({ id: String(id), topic: 't', key: null, payload: {}, audience: 'everyone', tags });

describe('the state cache', () => {
  it('serves a fleet read to every caller with the same scopes, a tenant read to its tenant only, and never across scopes', async () => {
    const { cache } = await started();
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    await kept.process(fetchOf(MACHINES, alice));
    const forCarol = await kept.process(fetchOf(MACHINES, carol));
    // Same scopes (in another order for bob): the fleet answer is everyone's.
    await kept.process(fetchOf(MACHINES, bob));
    expect(fleet.calls()).toBe(1);
    expect(forCarol.data).toEqual({ n: 1, who: 'alice' });
    // An operator's scopes differ: its own fetch.
    await kept.process(fetchOf(MACHINES, operator));
    expect(fleet.calls()).toBe(2);

    const bookings = subgraph(tenantRead);
    const tenantKept = cache.wrap('rental', bookings.source);
    await tenantKept.process(fetchOf(BOOKINGS, alice));
    const bobs = await tenantKept.process(fetchOf(BOOKINGS, bob));
    expect(bookings.calls()).toBe(1);
    expect(bobs.data).toEqual({ n: 1, who: 'alice' });
    const carols = await tenantKept.process(fetchOf(BOOKINGS, carol));
    expect(bookings.calls()).toBe(2);
    expect(carols.data).toEqual({ n: 2, who: 'carol' });
  });

  it('keys an answer read per principal to that principal, and keeps nothing without tags, with errors, or uncacheable', async () => {
    const { cache } = await started();
    const own = subgraph(() => ({ tags: ['BondingSession@acme'], grain: 'principal' }));
    const kept = cache.wrap('bonding', own.source);
    await kept.process(fetchOf(MACHINES, alice));
    await kept.process(fetchOf(MACHINES, alice));
    await kept.process(fetchOf(MACHINES, bob));
    expect(own.calls()).toBe(2);

    for (const state of [{ grain: 'everyone' } as StateExtension, { uncacheable: 'reads outbox, which is not declared state' }]) {
      const s = subgraph(() => state);
      const k = cache.wrap('rental', s.source);
      await k.process(fetchOf(MACHINES, alice));
      await k.process(fetchOf(MACHINES, alice));
      expect(s.calls()).toBe(2);
    }
    let calls = 0;
    const failing = cache.wrap('rental', {
      process: async () => ({ data: { x: ++calls }, errors: [{ message: 'no' }], extensions: { state: { lineage: LINEAGE, ...fleetRead() } } }),
    });
    await failing.process(fetchOf(MACHINES, alice));
    await failing.process(fetchOf(MACHINES, alice));
    expect(calls).toBe(2);
  });

  it('never keeps an answer from a database whose event log it does not read', async () => {
    const { cache } = await started();
    const other = subgraph(() => ({ tags: ['Machine'], grain: 'everyone', lineage: 'another-database' }));
    const kept = cache.wrap('optimization', other.source);
    await kept.process(fetchOf(MACHINES, alice));
    await kept.process(fetchOf(MACHINES, alice));
    expect(other.calls()).toBe(2);
    expect(cache.snapshot().entries).toBe(0);
  });

  it('drops exactly the entries an event names, and everything for an event that names `*`', async () => {
    const { cache } = await started();
    const fleet = subgraph(fleetRead);
    const bookings = subgraph(tenantRead);
    const f = cache.wrap('rental', fleet.source);
    const b = cache.wrap('rental', bookings.source);
    await f.process(fetchOf(MACHINES, alice));
    await b.process(fetchOf(BOOKINGS, alice));
    await b.process(fetchOf(BOOKINGS, carol));
    cache.onEvent(event(1, ['Booking', 'Booking:BK-1', 'Booking@globex']));
    await f.process(fetchOf(MACHINES, alice));
    await b.process(fetchOf(BOOKINGS, alice));
    await b.process(fetchOf(BOOKINGS, carol));
    expect([fleet.calls(), bookings.calls()]).toEqual([1, 3]);
    cache.onEvent(event(2, ['*']));
    await f.process(fetchOf(MACHINES, alice));
    await b.process(fetchOf(BOOKINGS, alice));
    expect([fleet.calls(), bookings.calls()]).toEqual([2, 4]);
    expect(cache.stats.evictions.get('event')).toBe(4);
  });

  it('never stores a read that was answered before a write whose eviction came while it was in flight (the fence)', async () => {
    const { cache } = await started();
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    const release = fleet.hold();
    const inFlight = kept.process(fetchOf(MACHINES, alice));
    // The subgraph has read the machines; a write commits and its event is read before the answer arrives.
    await until(() => fleet.calls() === 1, 'the fetch to start');
    cache.onEvent(event(7, ['Machine', 'Machine:M-1']));
    release();
    await inFlight;
    expect(cache.stats.fenced).toBe(1);
    await kept.process(fetchOf(MACHINES, alice));
    expect(fleet.calls()).toBe(2);
    // An eviction of something else does not fence.
    const release2 = fleet.hold();
    cache.onEvent(event(8, ['Machine']));
    const again = kept.process(fetchOf(MACHINES, alice));
    await until(() => fleet.calls() === 3, 'the second fetch to start');
    cache.onEvent(event(9, ['Booking@acme']));
    release2();
    await again;
    await kept.process(fetchOf(MACHINES, alice));
    expect(fleet.calls()).toBe(3);
    expect(cache.stats.fenced).toBe(1);
  });

  it('stops serving at once when a probe cannot read the log, and serves again once one can', async () => {
    let down = false;
    const { cache } = await started({
      newest: async () => {
        if (down) throw new Error('connection refused');
        return 0n;
      },
    });
    await cache.probe();
    expect(cache.serving()).toBe(true);
    down = true;
    await expect(cache.probe()).rejects.toThrow('connection refused');
    expect(cache.serving()).toBe(false);
    down = false;
    await cache.probe();
    expect(cache.serving()).toBe(true);
  });

  it('serves nothing while the log is not caught up within the bound, and again once it is', async () => {
    let now = 0;
    const { cache, log } = await started({ maxLagMs: 1000, now: () => now });
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    await kept.process(fetchOf(MACHINES, alice));
    await kept.process(fetchOf(MACHINES, alice));
    expect(fleet.calls()).toBe(1);
    // The log moves on and this process cannot read it (held): past the bound, reads go through.
    log.newest = 5n;
    log.held = true;
    now = 600;
    await cache.probe();
    now = 1200;
    expect(cache.serving()).toBe(false);
    await kept.process(fetchOf(MACHINES, alice));
    await kept.process(fetchOf(MACHINES, alice));
    expect(fleet.calls()).toBe(3);
    expect(cache.stats.bypassed.get('rental')).toBe(2);
    log.held = false;
    await cache.probe();
    expect(cache.serving()).toBe(true);
    expect(cache.snapshot().lagEvents).toBe(0);
  });

  it('evicts everything and stops serving for good when the log goes back (another database)', async () => {
    const { cache, log } = await started();
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    log.newest = 10n;
    await cache.probe();
    await kept.process(fetchOf(MACHINES, alice));
    log.newest = 3n;
    await cache.probe();
    expect(cache.serving()).toBe(false);
    expect(cache.snapshot().entries).toBe(0);
  });

  it('waits for its consumer to reach a position a request names, and reads through when it does not in time', async () => {
    const { cache, log } = await started({ waitMs: 100 });
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    await kept.process(fetchOf(MACHINES, alice));
    log.newest = 4n;
    // Reached on the first wake: served from the cache.
    await kept.process(fetchOf(MACHINES, alice, { asked: 4n, written: null }));
    expect(fleet.calls()).toBe(1);
    expect(log.delivered).toBe(4n);
    // Held: after the wait, read from the subgraph.
    log.newest = 9n;
    log.held = true;
    await kept.process(fetchOf(MACHINES, alice, { asked: 9n, written: null }));
    expect(fleet.calls()).toBe(2);
    expect(cache.stats.bypassed.get('rental')).toBe(1);
  });

  it("evicts what a write answered through it changed before the answer leaves, and gives the request the write's position", async () => {
    const { cache } = await started();
    const fleet = subgraph(fleetRead);
    const kept = cache.wrap('rental', fleet.source);
    await kept.process(fetchOf(MACHINES, alice));
    const writes = cache.wrap('rental', {
      process: async () => ({ data: { createQuote: { id: 'Q' } }, extensions: { state: { position: '12', changed: ['Machine', 'Machine:M-1'] } } }),
    });
    const positions: StatePositions = { asked: null, written: null };
    await writes.process(fetchOf('mutation { createQuote { id } }', alice, positions));
    expect(positions.written).toBe(12n);
    await kept.process(fetchOf(MACHINES, alice));
    expect(fleet.calls()).toBe(2);
    expect(cache.stats.evictions.get('write')).toBe(1);
  });

  it('bounds memory, least recently used first, and a tenant to its share', async () => {
    const { cache } = await started({ maxBytes: 40_000, tenantShare: 0.5 });
    const big = subgraph((q, p) => ({ tags: [`Booking@${p.tenant}`], grain: 'tenant' }));
    const kept = cache.wrap('rental', big.source);
    // Each entry's key differs by its variables; about 1 KiB each with the key and overhead.
    const read = (i: number, p: Principal) =>
      kept.process({
        ...fetchOf(BOOKINGS, p),
        request: { query: BOOKINGS, variables: { i, pad: 'x'.repeat(400) } },
      });
    for (let i = 0; i < 60; i += 1) await read(i, alice);
    const acme = cache.snapshot().bytes;
    expect(acme).toBeLessThanOrEqual(20_000);
    expect(cache.stats.evictions.get('tenant')).toBeGreaterThan(0);
    // The most recent are kept, the oldest went.
    const before = big.calls();
    await read(59, alice);
    expect(big.calls()).toBe(before);
    await read(0, alice);
    expect(big.calls()).toBe(before + 1);
    for (let i = 0; i < 60; i += 1) await read(i, carol);
    expect(cache.snapshot().bytes).toBeLessThanOrEqual(40_000);
  });

  it('holds an answer no longer than the clock bound its subgraph gave, nor its @cacheControl hint', async () => {
    const { cache } = await started({ capOf: (q) => (q.includes('bookings') ? 0 : null) });
    const soon = subgraph(() => ({ tags: ['Quote:Q-1'], grain: 'tenant', validUntil: Date.now() - 1 }));
    const k = cache.wrap('rental', soon.source);
    await k.process(fetchOf(MACHINES, alice));
    await k.process(fetchOf(MACHINES, alice));
    expect(soon.calls()).toBe(2);
    const hinted = subgraph(fleetRead);
    const h = cache.wrap('rental', hinted.source);
    await h.process(fetchOf(BOOKINGS, alice));
    await h.process(fetchOf(BOOKINGS, alice));
    expect(hinted.calls()).toBe(2);
  });

  it('evicts a whole type, its rows and owners, on an operator request', async () => {
    const { cache } = await started();
    const rows = subgraph((q) => ({ tags: [q.includes('bookings') ? 'Booking@acme' : 'Machine:M-1'], grain: 'tenant' }));
    const k = cache.wrap('rental', rows.source);
    await k.process(fetchOf(MACHINES, alice));
    await k.process(fetchOf(BOOKINGS, alice));
    expect(cache.evictTags(['Booking:*'], 'admin')).toBe(1);
    expect(cache.snapshot().entries).toBe(1);
  });
});
