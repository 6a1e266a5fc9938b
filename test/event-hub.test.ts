import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../platform/db.js';
import { EventHub, type StoredEvent } from '../platform/event-hub.js';
import { appendEvents } from '../platform/outbox.js';
import { migrate } from '../platform/migrate.js';
import { fileURLToPath } from 'node:url';

async function take<P>(stream: AsyncIterableIterator<StoredEvent<P>>, n: number): Promise<StoredEvent<P>[]> {
  const out: StoredEvent<P>[] = [];
  while (out.length < n) {
    const item = await stream.next();
    if (item.done) break;
    out.push(item.value);
  }
  return out;
}

describe('outbox event hub', () => {
  let db: Database;
  let hub: EventHub;
  beforeAll(async () => {
    db = await openDatabase({ url: undefined, dataDir: undefined });
    await migrate(db, [{ owner: 'platform', dir: fileURLToPath(new URL('../platform/migrations/', import.meta.url)) }]);
    hub = new EventHub(db);
    await hub.start();
  });
  afterAll(async () => {
    await hub.close();
    await db.close();
  });

  const write = async (n: number, key: (i: number) => string) => {
    for (let i = 0; i < n; i++) {
      await db.transaction((tx) => appendEvents(tx, [{ topic: 't', key: key(i), payload: { i } }]));
    }
    await hub.wake();
  };

  it('delivers live events and replays from a cursor in numeric cursor order, past one page', async () => {
    const live = hub.stream<{ i: number }>('t');
    await write(1200, (i) => (i % 2 === 0 ? 'even' : 'odd'));
    const got = await take(live, 1200);
    expect(got.map((e) => e.payload.i)).toEqual([...Array(1200).keys()]);
    const ids = got.map((e) => BigInt(e.id));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    await live.return!();

    // Replay after the 7th event: ids 8.. in order (9 < 10 < 11 numerically, not as text), across pages.
    const replay = hub.stream<{ i: number }>('t', { after: got[6]!.id, keys: ['odd'] });
    const again = await take(replay, 597);
    expect(again.map((e) => e.payload.i)).toEqual([...Array(1200).keys()].filter((i) => i > 6 && i % 2 === 1));
    // Then it continues live without a gap or duplicate.
    await write(4, () => 'odd');
    const more = await take(replay, 4);
    expect(more.map((e) => e.payload.i)).toEqual([0, 1, 2, 3]);
    expect(BigInt(more[0]!.id)).toBeGreaterThan(BigInt(again[again.length - 1]!.id));
    await replay.return!();
  });
});
