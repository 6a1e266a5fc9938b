import { spawn, type ChildProcess } from 'node:child_process';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql, rest } from '../../support/http.js';
import { startFeaturesServer, type FeaturesTestServer } from '../../support/features.js';
import { freePort } from '../../support/port.js';
import { until } from '../../support/wait.js';

/*
 * The Redis online store against a redis-server of this test's own (no persistence, a free port), so that
 * stopping, flushing and restarting it disturbs nothing else: it is never rolled back or emptied by a
 * materialization, it answers 503 at once while Redis is down, and when Redis loses its values (flushed, or
 * restarted empty) it says so and rebuilds them by itself.
 */

/** How long a lookup waits for Redis here (FEATURES_REDIS_TIMEOUT_MS): shorter than the default, for the test's time. */
const REDIS_TIMEOUT_MS = 400;
const ENV = { FEATURES_SEED: '77', FEATURES_POLICIES: '200', GRAPHQL_MAX_COST: '200000', FEATURES_REDIS_TIMEOUT_MS: String(REDIS_TIMEOUT_MS) };
const POLICY = '/features/online/policy/P-000003';
const hasRedis = await new Promise<boolean>((resolve) => {
  const p = spawn('redis-server', ['--version']);
  p.on('error', () => resolve(false));
  p.on('exit', (code) => resolve(code === 0));
});
if (!hasRedis) console.warn('[features-online-redis] no redis-server on PATH: skipped (Debian package redis-server)');

/** A redis-server on `port` keeping nothing on disk. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const client = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
  client.on('error', () => undefined);
  await until(async () => {
    try {
      await client.connect();
      await client.ping();
      return true;
    } catch {
      return false;
    }
  }, 'redis-server to answer');
  await client.close();
  return child;
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe.runIf(hasRedis)('the Redis online store: forward only, fail fast, lost data found and rebuilt', () => {
  let port: number;
  let redis: ChildProcess;
  let server: FeaturesTestServer;
  let url: string;
  beforeAll(async () => {
    port = await freePort();
    redis = await startRedis(port);
    server = await startFeaturesServer({
      backend: 'pglite',
      mode: 'one-process',
      env: { ...ENV, REDIS_URL: `redis://127.0.0.1:${port}`, FEATURES_REDIS_PREFIX: 'fx' },
    });
    url = server.url;
  }, 180_000);
  afterAll(async () => {
    await server?.close();
    if (redis) await stopRedis(redis);
  });

  it('refuses a materialization older than what is served, or one that would empty a view (409, nothing changed)', async () => {
    const first = await rest(url, 'POST', '/features/offline', { as_of: '2025-06-01T00:00:00Z', views: ['policy_profile'] });
    expect(first.status).toBe(200);
    const served = await rest(url, 'GET', POLICY);
    expect(served.status).toBe(200);
    for (const asOf of ['1900-01-01T00:00:00Z', '2024-01-01T00:00:00Z']) {
      const older = await rest(url, 'POST', '/features/offline', { as_of: asOf, views: ['policy_profile'] });
      expect(older.status).toBe(409);
      expect(older.body).toMatchObject({ code: 'CONFLICT' });
      expect(older.body['detail']).toContain(`policy_profile is served as of 2025-06-01T00:00:00.000Z (materialization ${first.body['materialization_id']})`);
    }
    // Nothing moved: the same materialization serves the same values.
    expect(await rest(url, 'GET', POLICY)).toMatchObject({ status: 200, body: served.body });
    // The same time again, or later, goes through.
    const again = await rest(url, 'POST', '/features/offline', { as_of: '2025-06-01T00:00:00Z', views: ['policy_profile'] });
    expect(again.status).toBe(200);
  });

  it("a lookup is one script call: Redis's script cache emptied, the next lookup sends the script again and answers the same", async () => {
    expect((await rest(url, 'POST', '/features/offline', { as_of: '2025-06-01T00:00:00Z', views: ['policy_profile'] })).status).toBe(200);
    const before = await rest(url, 'GET', POLICY);
    expect(before.status).toBe(200);
    const admin = createClient({ url: `redis://127.0.0.1:${port}` });
    await admin.connect();
    try {
      const calls = async () => {
        const stats = await admin.info('commandstats');
        const count = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
        return { evalsha: count('evalsha'), eval: count('eval') };
      };
      await admin.scriptFlush();
      const start = await calls();
      const after = await rest(url, 'GET', POLICY);
      expect(after).toMatchObject({ status: 200, body: before.body });
      const again = await rest(url, 'GET', POLICY);
      expect(again).toMatchObject({ status: 200, body: before.body });
      const end = await calls();
      // The first lookup: EVALSHA refused (NOSCRIPT), then EVAL; the second: EVALSHA alone.
      expect({ evalsha: end.evalsha - start.evalsha, eval: end.eval - start.eval }).toEqual({ evalsha: 2, eval: 1 });
    } finally {
      await admin.close();
    }
  });

  it('Redis flushed: health degraded and lookups 503 (never 404) until the values are rebuilt by themselves', async () => {
    const before = await rest(url, 'GET', POLICY);
    expect(before.status).toBe(200);
    const admin = createClient({ url: `redis://127.0.0.1:${port}` });
    await admin.connect();
    await admin.flushAll();
    await admin.close();
    const statuses = new Set<number>();
    await until(async () => {
      const res = await rest(url, 'GET', POLICY);
      statuses.add(res.status);
      return res.status === 200 && res.body['views'][0].materialization_id !== before.body['views'][0].materialization_id;
    }, 'the online store to be rebuilt');
    expect(
      [...statuses].filter((s) => s !== 200 && s !== 503),
      JSON.stringify([...statuses]),
    ).toEqual([]);
    const after = await rest(url, 'GET', POLICY);
    expect(after.body['features']).toEqual(before.body['features']);
    expect((await rest(url, 'GET', '/features/health')).body['checks']['online_store']).toMatchObject({ ok: true });
  });

  it('Redis not answering (its process paused, its connections open): lookups 503 with Retry-After at the deadline, health degraded; answering again: 200', async () => {
    const before = await rest(url, 'GET', POLICY);
    expect(before.status).toBe(200);
    redis.kill('SIGSTOP');
    try {
      const t0 = performance.now();
      const lookup = await rest(url, 'GET', POLICY);
      const lookupMs = performance.now() - t0;
      expect(lookup.status).toBe(503);
      expect(lookup.headers.get('retry-after')).toBe('5');
      expect(lookup.body).toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        detail: `The online store is unavailable: Redis did not answer within ${REDIS_TIMEOUT_MS} ms; retry later`,
      });
      // The deadline, not node-redis's (which ends once a command is written) nor the socket's.
      expect(lookupMs).toBeGreaterThanOrEqual(REDIS_TIMEOUT_MS - 50);
      expect(lookupMs).toBeLessThan(REDIS_TIMEOUT_MS + 1500);
      const health = await rest(url, 'GET', '/features/health');
      expect(health.body['checks']['online_store']).toMatchObject({ ok: false });
    } finally {
      redis.kill('SIGCONT');
    }
    await until(async () => (await rest(url, 'GET', POLICY)).status === 200, 'lookups to answer again once Redis answers');
    expect((await rest(url, 'GET', POLICY)).body).toEqual(before.body);
  });

  it('Redis stopped: 503 with Retry-After within 2 s on REST and GraphQL, health and metrics degraded; restarted empty: rebuilt without a restart', async () => {
    const before = await rest(url, 'GET', POLICY);
    await stopRedis(redis);
    await until(async () => (await rest(url, 'GET', '/health')).status === 503, 'health to report the online store down');
    const t0 = performance.now();
    const lookup = await rest(url, 'GET', POLICY);
    const lookupMs = performance.now() - t0;
    expect(lookup.status).toBe(503);
    expect(lookup.headers.get('retry-after')).toBe('5');
    expect(lookup.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', detail: 'The online store is unavailable: Redis cannot be reached; retry later' });
    expect(lookupMs).toBeLessThan(2000);
    const t1 = performance.now();
    const materialize = await rest(url, 'POST', '/features/offline', { as_of: '2025-06-01T00:00:00Z', views: ['policy_profile'] });
    expect(performance.now() - t1).toBeLessThan(2000);
    expect(materialize.status).toBe(503);
    const q = await gql(url, '{ onlinePolicyFeatures(id: "P-000003") { values { column value } } }');
    expect(q.errors?.[0]?.extensions?.['code']).toBe('SERVICE_UNAVAILABLE');
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/subgraph_ready\{subgraph="features"\} 0/);

    redis = await startRedis(port);
    await until(async () => {
      const res = await rest(url, 'GET', POLICY);
      return res.status === 200;
    }, 'lookups to answer again after Redis came back empty');
    const after = await rest(url, 'GET', POLICY);
    expect(after.body['features']).toEqual(before.body['features']);
    expect(after.body['views'][0].materialization_id).not.toBe(before.body['views'][0].materialization_id);
    await until(async () => (await rest(url, 'GET', '/health')).status === 200, 'health ok again');
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/subgraph_ready\{subgraph="features"\} 1/);
  });
});
