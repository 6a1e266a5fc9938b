import { describe, expect, it } from 'vitest';
import { floodWhileMeasuring, hostileRequests } from '../../../bench/hostile.js';
import { loadConfig } from '../../../gateway/config.js';
import { startTestServer } from '../../support/server.js';

/*
 * The hardening measure of the request limits: while a client floods the server with the worst documents it
 * can build under the body limit, the server's event loop stays responsive and /health keeps answering.
 * The server runs in this thread (its loop is the one measured); the flood comes from a worker thread.
 */
describe('a flood of hostile requests', () => {
  it('keeps the event loop responsive (p99 delay bounded) and /health answering, each request answered as it should be', async () => {
    const server = await startTestServer();
    const requests = hostileRequests(loadConfig({}).BODY_LIMIT_BYTES);
    // Warm the paths once, so the measure is of the steady state rather than of first-call compilation.
    for (const r of requests)
      await fetch(server.url + r.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: r.body }).then((res) => res.arrayBuffer());
    const result = await floodWhileMeasuring(server.url, requests, { concurrency: 8, seconds: 6, maxRequests: 600 });

    const unexpected = Object.entries(result.answers).filter(([key]) => {
      const r = requests.find((x) => key.startsWith(`${x.name} `));
      const status = Number(key.slice((r?.name.length ?? 0) + 1));
      return !r || !r.expect.includes(status);
    });
    expect(unexpected).toEqual([]);
    expect(result.requests).toBeGreaterThan(requests.length);
    // The target, p99 under 100 ms, is a performance figure: `npm run bench -- flood` measures it on an
    // otherwise idle machine (docs/operations.md gives the figures; about 50 ms here when this file runs alone,
    // about 110 ms beside another suite file, 320 ms on a machine at load average 8). A descheduled thread
    // counts as loop delay, so this test holds a bound no busy machine reaches but any request that is
    // expensive before it is refused does (one such document holds the loop for seconds to minutes: the
    // bench's second run); that operations take turns is held by test/gateway/http/admission.test.ts.
    console.log(
      `flood: ${result.requests} requests in ${result.seconds} s; loop delay p50 ${result.loopDelay.p50} ms, p99 ${result.loopDelay.p99} ms, max ${result.loopDelay.max} ms; /health ${result.health.ok}/${result.health.asked}, slowest ${Math.round(result.health.maxMs)} ms`,
    );
    expect(result.loopDelay.p99, JSON.stringify(result)).toBeLessThan(1000);
    expect(result.health.asked).toBeGreaterThan(0);
    expect(result.health.ok).toBe(result.health.asked);
  }, 180_000);
});
