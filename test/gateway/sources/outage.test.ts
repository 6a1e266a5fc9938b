import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  classifyDatabaseError,
  connectivityFailure,
  DATABASE_UNAVAILABLE_MESSAGE,
  DatabaseUnavailableError,
  OUTAGE_RETRY_AFTER_SECONDS,
  redactDatabaseUrl,
} from '../../../platform/db-errors.js';
import { openDatabase, type Database } from '../../../platform/db.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { dropSchema, modes, startTestServer, TEST_DATABASE_URL, type Mode, type TestServer } from '../../support/server.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { until, waitFor } from '../../support/wait.js';

/** Starting servers (migrations, models, composition) takes tens of seconds on a loaded machine. */
const START_TIMEOUT_MS = 180_000;

const quoteBody = (machine: string) => ({ machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(3), duration_hours: 4 });

/** The rental subgraph's database: the gateway's in one process, the rental server's in distributed mode. */
const rentalDb = (server: TestServer): Database => server.subgraphServers.get('rental')?.runtime.db ?? server.db;

/**
 * What every caller sees while the database cannot be reached: REST 503 problem details with Retry-After,
 * GraphQL SERVICE_UNAVAILABLE (HTTP 503 when nothing could be answered; a field of a subgraph that needs
 * no database still resolves), health 503 on /health and /health/ready, 200 on /health/live. Nothing names
 * the driver, the connection string or its password.
 */
async function expectOutage(server: TestServer, secrets: readonly string[]): Promise<void> {
  const bodies: string[] = [];
  // The state cache serves what it holds until its next probe of the log fails (every quarter of
  // STATE_CACHE_MAX_LAG_MS), then nothing: from there every read goes to the database like this one.
  const summary = await waitFor(async () => {
    const res = await rest(server.url, 'GET', '/rental/fleet/summary');
    return res.status === 503 ? res : null;
  }, 'the fleet summary to report the outage');
  expect(summary.status).toBe(503);
  expect(summary.headers.get('content-type')).toContain('application/problem+json');
  expect(summary.headers.get('retry-after')).toBe(String(OUTAGE_RETRY_AFTER_SECONDS));
  expect(summary.body).toEqual({
    type: 'urn:ops-supergraph:problem:service-unavailable',
    title: 'Service unavailable',
    status: 503,
    detail: DATABASE_UNAVAILABLE_MESSAGE,
    code: 'SERVICE_UNAVAILABLE',
    instance: '/rental/fleet/summary',
  });
  const quote = await rest(server.url, 'POST', '/rental/pricing/quote', quoteBody('EQ-010'));
  expect(quote.status).toBe(503);
  expect(quote.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', detail: DATABASE_UNAVAILABLE_MESSAGE });
  expect(quote.headers.get('retry-after')).toBe(String(OUTAGE_RETRY_AFTER_SECONDS));
  bodies.push(JSON.stringify(summary.body), JSON.stringify(quote.body));

  const res = await fetch(`${server.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify({ query: '{ fleetSummary { total } machines { id } }' }),
  });
  const q = (await res.json()) as { data: unknown; errors: { message: string; extensions: { code: string } }[] };
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe(String(OUTAGE_RETRY_AFTER_SECONDS));
  expect(q.data).toBeNull();
  expect(q.errors.length).toBeGreaterThan(0);
  for (const e of q.errors) expect(e).toMatchObject({ message: DATABASE_UNAVAILABLE_MESSAGE, extensions: { code: 'SERVICE_UNAVAILABLE' } });
  bodies.push(JSON.stringify(q));

  const mutation = await gql(server.url, 'mutation ($i: CreateQuoteInput!) { createQuote(input: $i) { id } }', {
    i: { machineIds: ['EQ-011'], locationId: 'LOC-001', startTime: hoursFromNow(3), durationHours: 4 },
  });
  expect(mutation.status).toBe(503);
  expect(mutation.errors?.[0]?.extensions?.['code']).toBe('SERVICE_UNAVAILABLE');

  // The prediction subgraph needs no database: its field resolves, the rental one fails, 200 as usual.
  const mixed = await gql(server.url, '{ predictionModels { __typename } machine(id: "EQ-001") { id } }');
  expect(mixed.status).toBe(200);
  expect(mixed.data).toEqual({ predictionModels: { __typename: 'PredictionModels' }, machine: null });
  expect(mixed.errors).toEqual([expect.objectContaining({ path: ['machine'], extensions: expect.objectContaining({ code: 'SERVICE_UNAVAILABLE' }) })]);

  // /health answers from a round of checks at most 250 ms old: it says so within that.
  const health = await waitFor(async () => {
    const res = await rest(server.url, 'GET', '/health');
    return res.status === 503 ? res : null;
  }, 'health to report the outage');
  expect(health.body).toMatchObject({ status: 'degraded', ready: false, subgraphs: { rental: { ready: false }, prediction: { ready: true } } });
  expect((await rest(server.url, 'GET', '/health/ready')).status).toBe(503);
  const live = await rest(server.url, 'GET', '/health/live');
  expect(live.status).toBe(200);
  expect(live.body).toMatchObject({ status: 'ok' });

  for (const body of bodies) {
    expect(body).not.toMatch(/INTERNAL_SERVER_ERROR|PGlite|ECONN|terminat|postgres:|pg-pool|node_modules/i);
    for (const secret of secrets) expect(body).not.toContain(secret);
  }
}

// One process only: an embedded database per subgraph server makes the distributed start slow, and the
// distributed path (the subgraph server's error formatting, its /health) runs below on PostgreSQL.
describe('the embedded database closed under a running server (pglite)', () => {
  it(
    'answers 503 SERVICE_UNAVAILABLE with Retry-After on REST and GraphQL; health says not ready',
    async () => {
      const server = await startTestServer();
      expect((await rest(server.url, 'GET', '/rental/fleet/summary')).status).toBe(200);
      expect((await rest(server.url, 'GET', '/health')).status).toBe(200);
      expect((await rest(server.url, 'GET', '/health/ready')).status).toBe(200);
      await rentalDb(server).close();
      await expectOutage(server, []);
    },
    START_TIMEOUT_MS,
  );
});

if (!TEST_DATABASE_URL) console.warn('[outage] TEST_DATABASE_URL is not set: the PostgreSQL outage tests are skipped.');

describe.runIf(TEST_DATABASE_URL).each(modes)('PostgreSQL going away and coming back (%s)', (mode: Mode) => {
  const target = new URL(TEST_DATABASE_URL ?? 'postgres://127.0.0.1:5432/test');
  let proxy: TcpProxy;
  afterAll(async () => {
    await proxy?.close();
  });

  it(
    '503 with Retry-After while it is down, by itself back to 200 when it returns; a terminated backend costs nothing',
    async () => {
      proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
      const secret = `pw${randomBytes(6).toString('hex')}`;
      const viaProxy = new URL(TEST_DATABASE_URL!);
      viaProxy.host = `127.0.0.1:${proxy.port}`;
      // A password the server does not check (trust authentication): it must not leak into any answer.
      if (!viaProxy.username) viaProxy.username = 'postgres';
      viaProxy.password = secret;
      const server = await startTestServer({ backend: 'postgres', mode, env: { DATABASE_URL: viaProxy.href } });
      expect((await rest(server.url, 'POST', '/rental/pricing/quote', quoteBody('EQ-001'))).status).toBe(200);

      // Every backend behind the proxy terminated by an administrator (57P01): the pool replaces them.
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      try {
        const killed = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1::int[])', [proxy.upstreamPorts()]);
        expect(killed.rowCount).toBeGreaterThan(0);
      } finally {
        await admin.end();
      }
      const statuses: number[] = [];
      await until(async () => {
        const res = await rest(server.url, 'GET', '/rental/fleet/summary');
        statuses.push(res.status);
        return res.status === 200;
      }, 'a fleet summary after the backends were terminated');
      // At most a request that held a dying connection fails, and then as an outage, never as a fault.
      expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);

      await proxy.cut();
      await expectOutage(server, [secret, String(proxy.port)]);

      await proxy.restore();
      await until(async () => (await rest(server.url, 'GET', '/rental/fleet/summary')).status === 200, 'recovery of REST');
      await until(async () => (await rest(server.url, 'GET', '/health')).status === 200, 'health ready again');
      expect((await rest(server.url, 'GET', '/health/ready')).body).toMatchObject({ status: 'ok', ready: true });
      const after = await rest(server.url, 'POST', '/rental/pricing/quote', quoteBody('EQ-002'));
      expect(after.status).toBe(200);
      const q = await gql(server.url, '{ fleetSummary { reserved } }');
      expect(q).toMatchObject({ status: 200, data: { fleetSummary: { reserved: 2 } } });
    },
    START_TIMEOUT_MS,
  );
});

describe.runIf(TEST_DATABASE_URL).each(modes)('PostgreSQL that accepts but stops answering (%s)', (mode: Mode) => {
  const target = new URL(TEST_DATABASE_URL ?? 'postgres://127.0.0.1:5432/test');
  let proxy: TcpProxy | undefined;
  afterAll(async () => {
    await proxy?.close();
  });

  it(
    '503 SERVICE_UNAVAILABLE once DATABASE_QUERY_TIMEOUT_MS has passed, not a request held forever; back by itself',
    async () => {
      proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
      const viaProxy = new URL(TEST_DATABASE_URL!);
      viaProxy.host = `127.0.0.1:${proxy.port}`;
      // Without the state cache every read reaches the stalled database: how long one is held is what is measured.
      const server = await startTestServer({
        backend: 'postgres',
        mode,
        env: { DATABASE_URL: viaProxy.href, DATABASE_QUERY_TIMEOUT_MS: '1000', STATE_CACHE_MB: '0' },
      });
      expect((await rest(server.url, 'GET', '/rental/fleet/summary')).status).toBe(200);

      proxy.stall();
      const started = performance.now();
      const stalled = await rest(server.url, 'GET', '/rental/fleet/summary');
      const waitedMs = performance.now() - started;
      expect(stalled.status).toBe(503);
      expect(stalled.headers.get('retry-after')).toBe(String(OUTAGE_RETRY_AFTER_SECONDS));
      expect(stalled.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', detail: DATABASE_UNAVAILABLE_MESSAGE });
      // The client gives up 1 s after the 1 s statement limit; the bound leaves a busy machine room.
      expect(waitedMs).toBeGreaterThan(1_000);
      expect(waitedMs).toBeLessThan(15_000);

      proxy.unstall();
      await until(async () => (await rest(server.url, 'GET', '/rental/fleet/summary')).status === 200, 'recovery after the stall');
      expect((await rest(server.url, 'POST', '/rental/pricing/quote', quoteBody('EQ-003'))).status).toBe(200);
    },
    START_TIMEOUT_MS,
  );
});

describe.runIf(TEST_DATABASE_URL)('the database layer classifies a lost connection once (postgres)', () => {
  const schema = `t_outage_${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    await dropSchema(schema);
  });

  it('a query whose backend is terminated fails as DatabaseUnavailableError (57P01); a SQL error stays itself', async () => {
    const app = `outage_${randomBytes(4).toString('hex')}`;
    const db = await openDatabase({ url: `${TEST_DATABASE_URL}${TEST_DATABASE_URL!.includes('?') ? '&' : '?'}application_name=${app}`, schema });
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      const sleeping = db.query('SELECT pg_sleep(30)');
      const inTx = db.transaction((tx) => tx.query('SELECT pg_sleep(30)'));
      // Handled from the start: they reject while the terminate is still being answered.
      const settled = Promise.allSettled([sleeping, inTx]);
      await until(async () => {
        const n = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%pg_sleep%'`, [app]);
        return n.rows[0].n === 2;
      }, 'both sleeps to run');
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
      for (const failed of await settled) {
        expect(failed.status).toBe('rejected');
        const reason = (failed as PromiseRejectedResult).reason as DatabaseUnavailableError;
        expect(reason).toBeInstanceOf(DatabaseUnavailableError);
        expect(reason.message).toBe(DATABASE_UNAVAILABLE_MESSAGE);
        expect(reason.extensions.code).toBe('SERVICE_UNAVAILABLE');
      }
      await expect(db.query('SELECT * FROM no_such_table')).rejects.toMatchObject({ code: '42P01' });
      // The pool makes new connections: the same database object serves again.
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
      await db.close();
    }
  });
});

describe('classifying driver errors', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

  it('names connectivity failures and leaves every other error alone', () => {
    expect(connectivityFailure(withCode('ECONNREFUSED'))).toBe('connection refused');
    expect(connectivityFailure(withCode('ENOTFOUND'))).toBe('host not found');
    expect(connectivityFailure(withCode('57P01'))).toBe('the server terminated the connection (admin shutdown)');
    expect(connectivityFailure(withCode('08006'))).toBe('connection exception');
    expect(connectivityFailure(withCode('53300'))).toBe('the server has too many connections');
    expect(connectivityFailure(withCode('53000'))).toBe('the server is out of resources');
    expect(connectivityFailure(withCode('57P03'))).toBe('the server is not accepting connections (starting up or shutting down)');
    expect(connectivityFailure(withCode('57P05'))).toBe('the server closed an idle session');
    // 55000 is an outage only where the server refused the connection, not from a statement.
    expect(connectivityFailure(Object.assign(withCode('55000'), { routine: 'CheckMyDatabase' }))).toBe('the database does not accept connections');
    expect(connectivityFailure(Object.assign(withCode('55000'), { routine: 'nextval_internal' }))).toBeNull();
    expect(connectivityFailure(withCode('55000'))).toBeNull();
    expect(connectivityFailure(new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')], 'connect'))).toBe('connection refused');
    expect(connectivityFailure(new Error('Connection terminated unexpectedly'))).toBe('connection closed');
    expect(connectivityFailure(new Error('timeout exceeded when trying to connect'))).toBe('timed out waiting for a database connection');
    expect(connectivityFailure(new Error('PGlite is closed'))).toBe('the embedded database is closed');
    for (const other of [withCode('23505'), withCode('40001'), withCode('42P01'), new Error('boom'), 'text', null]) {
      expect(connectivityFailure(other)).toBeNull();
      expect(classifyDatabaseError(other)).toBe(other);
    }
    const lost = classifyDatabaseError(withCode('ECONNRESET'));
    expect(lost).toBeInstanceOf(DatabaseUnavailableError);
    expect(classifyDatabaseError(lost)).toBe(lost);
  });

  it('redacts the password and secret parameters of a connection string', () => {
    expect(redactDatabaseUrl('postgres://app:p%40ss@db.internal:5432/ops')).toBe('postgres://app:***@db.internal:5432/ops');
    expect(redactDatabaseUrl('postgresql://app@db/ops?sslmode=require&password=x&sslkey=/k')).toBe(
      'postgresql://app@db/ops?sslmode=require&password=***&sslkey=***',
    );
    expect(redactDatabaseUrl('postgres://db/ops')).toBe('postgres://db/ops');
    expect(redactDatabaseUrl('postgres://a:b@[broken')).toBe('(an unparsable URL)');
  });
});
