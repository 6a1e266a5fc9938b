import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Maps a large batch in slices, giving the event loop a turn between them, so one request of many items
 * never holds the process (health checks, sockets, other requests) for its whole duration.
 */
export async function mapInSlices<T, R>(items: readonly T[], map: (item: T, index: number) => R, slice = 100): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  for (let start = 0; start < items.length; start += slice) {
    if (start > 0) await nextTurn();
    const end = Math.min(items.length, start + slice);
    for (let i = start; i < end; i++) out[i] = map(items[i] as T, i);
  }
  return out;
}
