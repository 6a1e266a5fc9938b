import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_UNAVAILABLE_MESSAGE, OUTAGE_RETRY_AFTER_SECONDS } from '../../../platform/db-errors.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, TEST_DATABASE_URL, type TestServer } from '../../support/server.js';
import { TcpProxy, type RefusalFields } from '../../support/tcp-proxy.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * PostgreSQL refusing new connections is an outage, whatever its reason: every SQLSTATE mapped in
 * platform/db-errors.ts answers 503 SERVICE_UNAVAILABLE with Retry-After on REST and GraphQL, an error
 * with that code on a subscription, and everything recovers without a restart once the server accepts
 * again. First staged with a proxy answering each connection with the server's own FATAL ErrorResponse,
 * then for real: a database of the test's own with ALLOW_CONNECTIONS false, and a role with CONNECTION
 * LIMIT 0.
 */

const START_TIMEOUT_MS = 180_000;

/** What PostgreSQL sends when it will not admit a connection (message texts as the server writes them). */
const REFUSALS: readonly RefusalFields[] = [
  { code: '08004', message: 'the server rejected the connection' },
  { code: '08006', message: 'connection failure' },
  { code: '53000', message: 'insufficient resources' },
  { code: '53100', message: 'could not write to file "base/pgsql_tmp": No space left on device' },
  { code: '53200', message: 'out of memory' },
  { code: '53300', message: 'sorry, too many clients already' },
  { code: '53400', message: 'configuration limit exceeded' },
  { code: '57P01', message: 'terminating connection due to administrator command' },
  { code: '57P02', message: 'terminating connection due to crash of another server process' },
  { code: '57P03', message: 'the database system is starting up' },
  { code: '57P03', message: 'the database system is shutting down' },
  { code: '57P04', message: 'database "test" does not exist any more' },
  { code: '57P05', message: 'terminating connection due to idle-session timeout' },
  { code: '55000', message: 'database "test" is not currently accepting connections', routine: 'CheckMyDatabase' },
];

interface Seen {
  rest: number;
  restCode: unknown;
  retryAfter: string | null;
  graphql: number;
  graphqlCodes: unknown[];
  subscription: unknown;
}

/** One REST call, one GraphQL query and one resuming subscription (it reads the outbox) during the refusal. */
async function underRefusal(server: TestServer, cursor: string): Promise<Seen> {
  const summary = await rest(server.url, 'GET', '/rental/fleet/summary');
  const q = await gql(server.url, '{ fleetSummary { total } }');
  const ws = wsClient(server.url);
  try {
    const sub = new Collector(ws.client, 'subscription ($after: ID) { fleetSummaryChanged(after: $after) { cursor } }', { after: cursor });
    await sub.until((c) => c.error !== undefined || c.results.some((r) => r.errors), undefined, 'the subscription to fail');
    const errors = (Array.isArray(sub.error) ? sub.error : (sub.results.find((r) => r.errors)?.errors ?? [])) as {
      extensions?: { code?: unknown };
      message?: string;
    }[];
    return {
      rest: summary.status,
      restCode: summary.body['code'],
      retryAfter: summary.headers.get('retry-after'),
      graphql: q.status,
      graphqlCodes: (q.errors ?? []).map((e) => e.extensions?.['code']),
      subscription: errors.map((e) => [e.extensions?.code, e.message]),
    };
  } finally {
    await ws.dispose();
  }
}

const OUTAGE: Seen = {
  rest: 503,
  restCode: 'SERVICE_UNAVAILABLE',
  retryAfter: String(OUTAGE_RETRY_AFTER_SECONDS),
  graphql: 503,
  graphqlCodes: ['SERVICE_UNAVAILABLE'],
  subscription: [['SERVICE_UNAVAILABLE', DATABASE_UNAVAILABLE_MESSAGE]],
};

/** A cursor with an event after it: a subscription resuming from it reads the outbox table first. */
async function cursorBeforeAnEvent(server: TestServer): Promise<string> {
  const cursor = String((await gql(server.url, '{ eventCursor }')).data?.['eventCursor']);
  const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
    machine_ids: ['EQ-001'],
    location_id: 'LOC-001',
    start_time: hoursFromNow(3),
    duration_hours: 4,
  });
  expect(quote.status).toBe(200);
  await until(async () => String((await gql(server.url, '{ eventCursor }')).data?.['eventCursor']) !== cursor, 'the quote event to be written');
  return cursor;
}

async function recovered(server: TestServer): Promise<void> {
  await until(async () => (await rest(server.url, 'GET', '/rental/fleet/summary')).status === 200, 'REST to answer again');
  await until(async () => (await rest(server.url, 'GET', '/health')).status === 200, 'health to be ready again');
  expect((await gql(server.url, '{ fleetSummary { total } }')).status).toBe(200);
}

if (!TEST_DATABASE_URL) console.warn('[outage-refusals] TEST_DATABASE_URL is not set: the PostgreSQL refusal tests are skipped.');

describe.runIf(TEST_DATABASE_URL)('PostgreSQL refusing connections, SQLSTATE by SQLSTATE (staged by a proxy)', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let cursor: string;
  beforeAll(async () => {
    const target = new URL(TEST_DATABASE_URL!);
    proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(TEST_DATABASE_URL!);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    // Replays read the outbox (none from memory), so the resuming subscription meets the refusal; and no state
    // cache: a refusal of new connections leaves the pooled ones (and the cache's exact answers) working, while
    // what is judged here is what a read that reaches the database answers.
    server = await startTestServer({ backend: 'postgres', env: { DATABASE_URL: viaProxy.href, EVENT_REPLAY_MEMORY: '0', STATE_CACHE_MB: '0' } });
    cursor = await cursorBeforeAnEvent(server);
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await server?.close();
    await proxy?.close();
  });

  for (const refusal of REFUSALS) {
    it(`${refusal.code} (${refusal.message}): 503 on REST and GraphQL, SERVICE_UNAVAILABLE on a subscription; back without a restart`, async () => {
      await proxy.refuse(refusal);
      expect(await underRefusal(server, cursor)).toEqual(OUTAGE);
      // /health answers from a round of checks at most 250 ms old: it says so within that.
      await until(async () => (await rest(server.url, 'GET', '/health')).status === 503, 'health to report the outage');
      await proxy.restore();
      await recovered(server);
    });
  }
});

describe.runIf(TEST_DATABASE_URL)('PostgreSQL refusing connections for real: a database and a role of the test', () => {
  const suffix = randomBytes(4).toString('hex');
  const database = `t_refuse_${suffix}`;
  const role = `r_refuse_${suffix}`;
  let admin: pg.Client;
  let server: TestServer;
  let cursor: string;
  const terminate = () => admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`CREATE DATABASE ${database} OWNER ${role}`);
    const url = new URL(TEST_DATABASE_URL!);
    url.username = role;
    url.password = '';
    url.pathname = `/${database}`;
    server = await startTestServer({ backend: 'postgres', schema: 'ops', env: { DATABASE_URL: url.href, EVENT_REPLAY_MEMORY: '0', STATE_CACHE_MB: '0' } });
    cursor = await cursorBeforeAnEvent(server);
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await server?.close();
    if (admin) {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  });

  const REAL_REFUSALS: readonly { what: string; refuse: () => string; accept: () => string }[] = [
    {
      what: 'ALTER DATABASE ... ALLOW_CONNECTIONS false (55000), then true',
      refuse: () => `ALTER DATABASE ${database} ALLOW_CONNECTIONS false`,
      accept: () => `ALTER DATABASE ${database} ALLOW_CONNECTIONS true`,
    },
    {
      what: 'ALTER ROLE ... CONNECTION LIMIT 0 (53300, too many connections for role), then -1',
      refuse: () => `ALTER ROLE ${role} CONNECTION LIMIT 0`,
      accept: () => `ALTER ROLE ${role} CONNECTION LIMIT -1`,
    },
    {
      what: 'ALTER DATABASE ... CONNECTION LIMIT 0 (53300, too many connections for database), then -1',
      refuse: () => `ALTER DATABASE ${database} CONNECTION LIMIT 0`,
      accept: () => `ALTER DATABASE ${database} CONNECTION LIMIT -1`,
    },
  ];
  for (const refusal of REAL_REFUSALS) {
    it(refusal.what, async () => {
      await admin.query(refusal.refuse());
      await terminate();
      expect(await underRefusal(server, cursor)).toEqual(OUTAGE);
      await admin.query(refusal.accept());
      await recovered(server);
    });
  }
});
