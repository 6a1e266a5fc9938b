import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE, type LockRecord } from '../../../platform/data-dir-lock.js';
import { hoursFromNow, rest } from '../../support/http.js';
import { startProcess, stopProcess, type ServerProcess } from '../../support/process.js';
import { TEST_DATABASE_URL } from '../../support/server.js';
import { waitFor, within } from '../../support/wait.js';

/** A start of the whole supergraph on a fresh data directory takes tens of seconds on a loaded machine. */
const PROCESS_TIMEOUT_MS = 240_000;

const dirs: string[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-start-'));
  dirs.push(dir);
  return dir;
}

/** A port held by a listener of this test (busy), or one that was free a moment ago (nobody listens). */
async function port(keepBusy: boolean): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const { port } = server.address() as { port: number };
  if (keepBusy) servers.push(server);
  else await new Promise((r) => server.close(r));
  return port;
}

const readLock = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as LockRecord;

/** A REST quote for machine EQ-003, five hours ahead: the start's migrations, demo fleet and signing key at work. */
const quoteOneMachine = (url: string) =>
  rest(url, 'POST', '/rental/pricing/quote', { machine_ids: ['EQ-003'], location_id: 'LOC-002', start_time: hoursFromNow(5), duration_hours: 6 });

/** The one line a failed start prints: no stack trace, nothing else on stderr. */
async function failedStart(p: ServerProcess): Promise<string> {
  expect(await p.exited).toBe(1);
  const lines = p
    .stderr()
    .split('\n')
    .filter((l) => l.trim() !== '');
  expect(lines, p.stderr()).toHaveLength(1);
  expect(p.stderr()).not.toMatch(/^\s+at /m);
  return lines[0]!;
}

describe.concurrent('a start that cannot go on says why in one line and exits non-zero', () => {
  it(
    'a second process on the same DATA_DIR refuses to start, naming the directory and the holder; a SIGKILLed holder does not block a restart',
    async () => {
      const dir = tempDir();
      const holder = startProcess('gateway/main.ts', { PORT: '0', DATA_DIR: dir });
      const url = await holder.serving;
      expect(readLock(dir)).toMatchObject({ pid: holder.pid });
      const quote = await quoteOneMachine(url);
      expect(quote.status).toBe(200);

      const second = startProcess('gateway/main.ts', { PORT: '0', DATA_DIR: dir });
      const line = await failedStart(second);
      expect(line).toMatch(
        new RegExp(`^ops-supergraph cannot start: DATA_DIR ${dir} is in use by process ${holder.pid} since \\S+: one process per data directory`),
      );
      // The holder was not disturbed.
      expect((await rest(url, 'GET', '/rental/fleet/summary')).body).toMatchObject({ reserved: 1 });

      // Killed without a chance to clean up: the lock file stays, naming a process that no longer runs.
      expect(await stopProcess(holder, 'SIGKILL')).toBe('SIGKILL');
      expect(readLock(dir).pid).toBe(holder.pid);
      const restarted = startProcess('gateway/main.ts', { PORT: '0', DATA_DIR: dir });
      const again = await restarted.serving;
      expect(readLock(dir).pid).toBe(restarted.pid);
      // Same data: the quote made before the kill still holds its machine and can be confirmed.
      expect((await rest(again, 'GET', '/rental/fleet/summary')).body).toMatchObject({ reserved: 1 });
      const confirmed = await rest(again, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: 'After Kill' });
      expect(confirmed.status).toBe(200);

      // A clean stop releases the lock.
      expect(await stopProcess(restarted, 'SIGTERM')).toBe(0);
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    },
    PROCESS_TIMEOUT_MS,
  );

  it(
    'a busy PORT is named before the database is opened (gateway)',
    async () => {
      const busy = await port(true);
      const dir = join(tempDir(), 'never-created');
      const p = startProcess('gateway/main.ts', { PORT: String(busy), DATA_DIR: dir });
      expect(await failedStart(p)).toBe(`ops-supergraph cannot start: PORT ${busy} is in use on 127.0.0.1`);
      expect(existsSync(dir)).toBe(false);
    },
    PROCESS_TIMEOUT_MS,
  );

  it(
    'a package missing from node_modules is named with what to do, no stack trace (npm start)',
    async () => {
      // The package is taken away by a resolve hook of this test's own: Node then reports it as not
      // installed, exactly as when node_modules lacks it.
      const dir = tempDir();
      const hooks = join(dir, 'hooks.mjs');
      writeFileSync(
        hooks,
        `export async function resolve(specifier, context, next) { return next(specifier === 'dataloader' ? 'dataloader-not-installed' : specifier, context); }\n`,
      );
      const register = join(dir, 'register.mjs');
      writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
      const p = startProcess('tools/start.mjs', { PORT: '0', DATA_DIR: join(dir, 'data'), NODE_OPTIONS: `--import ${pathToFileURL(register).href}` });
      expect(await p.exited).toBe(1);
      expect(p.stderr()).not.toMatch(/^\s+at /m);
      // On Node 20 a line before it says that Node is past its end of life.
      expect(p.stderr().trim().split('\n').at(-1)).toBe(
        "ops-supergraph cannot start: the package 'dataloader-not-installed' is not installed (node_modules is missing or incomplete): run `npm ci` in the project's directory, with network or npm's cache",
      );
    },
    PROCESS_TIMEOUT_MS,
  );

  it(
    'a busy PORT is named before the database is opened (npm run subgraph)',
    async () => {
      const busy = await port(true);
      const dir = join(tempDir(), 'never-created');
      const p = startProcess('gateway/subgraph-main.ts', { PORT: String(busy), DATA_DIR: dir }, ['rental']);
      expect(await failedStart(p)).toBe(`subgraph rental cannot start: PORT ${busy} is in use on 127.0.0.1`);
      expect(existsSync(dir)).toBe(false);
    },
    PROCESS_TIMEOUT_MS,
  );

  it(
    'an unreachable DATABASE_URL is named without its password',
    async () => {
      const closed = await port(false);
      const p = startProcess('gateway/main.ts', { PORT: '0', DATABASE_URL: `postgres://ops:s3cr3t-pw@127.0.0.1:${closed}/ops?sslpassword=k3y` });
      const line = await failedStart(p);
      expect(line).toBe(
        `ops-supergraph cannot start: cannot reach DATABASE_URL postgres://ops:***@127.0.0.1:${closed}/ops?sslpassword=***: connection refused`,
      );
      expect(p.stderr() + p.stdout()).not.toMatch(/s3cr3t|k3y/);
    },
    PROCESS_TIMEOUT_MS,
  );

  it.runIf(TEST_DATABASE_URL)(
    "a DATABASE_URL whose server answers but refuses is named with the server's reason (postgres)",
    async () => {
      const url = new URL(TEST_DATABASE_URL!);
      url.pathname = '/no_such_database_here';
      const p = startProcess('gateway/main.ts', { PORT: '0', DATABASE_URL: url.href });
      const line = await failedStart(p);
      expect(line).toMatch(
        /^ops-supergraph cannot start: cannot use DATABASE_URL postgres:\/\/\S+\/no_such_database_here: database "no_such_database_here" does not exist$/,
      );
    },
    PROCESS_TIMEOUT_MS,
  );
});

describe('npm start runs the compiled server (tools/start.mjs, tools/build.mjs)', () => {
  const clusterControl = join(fileURLToPath(new URL('../../../.build/pglite-cluster/', import.meta.url)), 'global', 'pg_control');
  /** The cluster's system identifier: the first 8 bytes of pg_control, made once by initdb and kept by every copy. */
  const systemIdentifier = (controlFile: string) => readFileSync(controlFile).subarray(0, 8).toString('hex');

  it(
    'compiles again when a source changed, and serves from the build what tsx serves: migrations, models, the supergraph, the dashboard; a new DATA_DIR starts as a copy of the cluster made at install',
    async () => {
      // A source changed since the build: the launcher compiles before it starts (its mtime is put back
      // after). The time given is this moment's, never one an earlier run of this test left in the build.
      const source = fileURLToPath(new URL('../../../platform/clock.ts', import.meta.url));
      const { atime, mtime } = statSync(source);
      utimesSync(source, atime, new Date(Math.max(Date.now(), mtime.getTime() + 1000)));
      const dir = tempDir();
      let p: ServerProcess;
      try {
        p = startProcess('tools/start.mjs', { PORT: '0', DATA_DIR: dir });
        await within(p.serving, 'the compiled server to serve', PROCESS_TIMEOUT_MS);
      } finally {
        utimesSync(source, atime, mtime);
      }
      const url = await p.serving;
      expect(p.stderr()).toMatch(/ops-supergraph: compiled the server from \d+ files in \d+ ms/);

      expect((await fetch(`${url}/health`)).status).toBe(200);
      // What changes no answer is built after listening, each task named until it is done.
      const warmUp = await waitFor(async () => {
        const health = (await (await fetch(`${url}/health`)).json()) as { warm_up?: { done: boolean; pending: string[] } };
        return health.warm_up?.done ? health.warm_up : null;
      }, 'the warm-up to be done');
      expect(warmUp.pending).toEqual([]);
      // Rental's migrations and demo fleet, its signing key made in this data directory.
      const quote = await quoteOneMachine(url);
      expect(quote.status).toBe(200);
      // Prediction's trained models, read from beside their module (demo mode: no credential configured).
      const models = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ predictionModels { ready seed } }' }),
      });
      expect(await models.json()).toMatchObject({ data: { predictionModels: { ready: true } } });
      // The dashboard, from web/dist.
      expect((await fetch(`${url}/`)).status).toBe(200);

      if (existsSync(clusterControl)) expect(systemIdentifier(join(dir, 'global', 'pg_control'))).toBe(systemIdentifier(clusterControl));
      expect(await stopProcess(p, 'SIGTERM')).toBe(0);
    },
    PROCESS_TIMEOUT_MS,
  );
});
