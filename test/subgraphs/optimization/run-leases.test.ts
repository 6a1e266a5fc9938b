import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { gql } from '../../support/http.js';
import { startProcess, stopProcess } from '../../support/process.js';
import { dropSchema, startTestServer, TEST_DATABASE_URL } from '../../support/server.js';
import { until } from '../../support/wait.js';

/*
 * A quantum run belongs to the process computing it. Killed with that process (kill -9), the run must not
 * stay RUNNING and hold a run slot: the embedded database's one writer fails it when it starts again; on
 * PostgreSQL, where instances share runs, the dead process stops renewing the run's lease and the next
 * sweep of any instance fails it.
 */

const START_MS = 180_000;
/** About 40 s of compute (20 qubits, depth 3, 100 evaluations): still running when the process is killed. */
const LONG_RUN = { problem: 'REGULAR3_MAXCUT', size: 20, depth: 3, shots: 1000, seed: 5, maxEvaluations: 100 };
const SHORT_RUN = { problem: 'REGULAR3_MAXCUT', size: 8, depth: 1, shots: 200, seed: 1, maxEvaluations: 5 };

interface Run {
  id: string;
  status: string;
  error: string | null;
}

async function startRun(url: string, input: Record<string, unknown>): Promise<Run> {
  const res = await gql<{ startQuantumRun: Run }>(url, 'mutation ($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id status error } }', { i: input });
  if (!res.data?.startQuantumRun) throw new Error(`startQuantumRun failed: ${JSON.stringify(res.errors)}`);
  return res.data.startQuantumRun;
}

async function runOf(url: string, id: string): Promise<Run> {
  const res = await gql<{ quantumRun: Run }>(url, 'query ($id: ID!) { quantumRun(id: $id) { id status error } }', { id });
  return res.data!.quantumRun;
}

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe('a run killed with its process (embedded database)', () => {
  it(
    'is failed at the next start, at once, and its slot is free',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'run-lease-'));
      dirs.push(dir);
      const env = { PORT: '0', DATA_DIR: dir, FEATURES_DATA_DIR: ':memory:', OPTIMIZATION_MAX_CONCURRENT_RUNS: '1', LOG_LEVEL: 'warn' };
      const first = startProcess('gateway/main.ts', { ...env, LOG_LEVEL: 'info' });
      const url = await first.serving;
      const run = await startRun(url, LONG_RUN);
      expect(run.status).toBe('RUNNING');
      // The slot is taken: a second run is refused while the first computes.
      const refused = await gql(url, 'mutation ($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id } }', { i: SHORT_RUN });
      expect(refused.errors?.[0]?.extensions?.['code']).toBe('RATE_LIMITED');
      expect(await stopProcess(first, 'SIGKILL')).toBe('SIGKILL');

      const second = startProcess('gateway/main.ts', { ...env, LOG_LEVEL: 'info' });
      const url2 = await second.serving;
      // Failed before the server served anything: no waiting for a lease on the embedded database.
      expect(await runOf(url2, run.id)).toEqual({ id: run.id, status: 'FAILED', error: 'interrupted: the process running it stopped (found at start)' });
      const next = await startRun(url2, SHORT_RUN);
      expect(next.status).toBe('RUNNING');
      await until(async () => (await runOf(url2, next.id)).status === 'COMPLETED', 'the next run to complete');
      await stopProcess(second);
    },
    START_MS,
  );
});

if (!TEST_DATABASE_URL) console.warn('[run-leases] TEST_DATABASE_URL is not set: the PostgreSQL lease test is skipped.');

describe.runIf(TEST_DATABASE_URL)('a run killed with its process (PostgreSQL, instances sharing runs)', () => {
  const schema = `t_lease_${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    await dropSchema(schema);
  });

  it(
    'keeps its lease while its process lives; another instance fails it once the lease expires, and frees its slot',
    async () => {
      const env = { DATABASE_URL: TEST_DATABASE_URL!, DATABASE_SCHEMA: schema, OPTIMIZATION_RUN_LEASE_S: '3', OPTIMIZATION_MAX_CONCURRENT_RUNS: '1' };
      const first = startProcess('gateway/main.ts', { ...env, PORT: '0', DATA_DIR: ':memory:', FEATURES_DATA_DIR: ':memory:' });
      const url = await first.serving;
      const run = await startRun(url, LONG_RUN);
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      try {
        const leaseOf = async () =>
          (await admin.query<{ lease: Date }>(`SELECT lease_until AS lease FROM ${schema}.optimization_runs WHERE id = $1`, [run.id])).rows[0]!.lease.getTime();
        // The owner renews the lease (every second here): it moves forward while the run computes.
        const initial = await leaseOf();
        await until(async () => (await leaseOf()) > initial, 'the lease to be renewed');

        const other = await startTestServer({ backend: 'postgres', schema, env: { OPTIMIZATION_RUN_LEASE_S: '3', OPTIMIZATION_MAX_CONCURRENT_RUNS: '1' } });
        try {
          // Alive and renewing: the other instance's sweeps leave the run alone, and its slot stays taken.
          expect((await runOf(other.url, run.id)).status).toBe('RUNNING');
          const refused = await gql(other.url, 'mutation ($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id } }', { i: SHORT_RUN });
          expect(refused.errors?.[0]?.extensions?.['code']).toBe('RATE_LIMITED');

          expect(await stopProcess(first, 'SIGKILL')).toBe('SIGKILL');
          const killedAt = performance.now();
          await until(async () => (await runOf(other.url, run.id)).status === 'FAILED', 'the run to be failed by the other instance');
          const waitedMs = performance.now() - killedAt;
          expect(await runOf(other.url, run.id)).toEqual({
            id: run.id,
            status: 'FAILED',
            error: 'interrupted: the process running it stopped (its lease expired)',
          });
          // The lease (3 s) plus one sweep interval (1 s), with room for a busy machine.
          expect(waitedMs).toBeLessThan(15_000);
          console.info(`[run-leases] killed run failed ${Math.round(waitedMs)} ms after kill -9 (lease 3 s, sweep every 1 s)`);
          const next = await startRun(other.url, SHORT_RUN);
          expect(next.status).toBe('RUNNING');
          await until(async () => (await runOf(other.url, next.id)).status === 'COMPLETED', 'the next run to complete');
        } finally {
          await other.close();
        }
      } finally {
        await admin.end();
      }
    },
    START_MS,
  );
});
