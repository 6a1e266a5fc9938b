/**
 * The server's "now" as the page estimates it from event timestamps, so that charts and countdowns line
 * up with the server's clock even when the browser's differs. Each event gives `at - received`, which is
 * the clock difference minus that event's delay; the largest seen is the best estimate (a replayed event
 * only gives a smaller one).
 */
let offsetMs: number | null = null;

export function observeServerTime(at: string): void {
  const offset = Date.parse(at) - Date.now();
  if (Number.isFinite(offset) && (offsetMs === null || offset > offsetMs)) offsetMs = offset;
}

export function serverNow(): number {
  return Date.now() + (offsetMs ?? 0);
}
