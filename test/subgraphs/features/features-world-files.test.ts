import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateWorld } from '../../../subgraphs/features/generator.js';
import { labelSetRows, OfflineStore } from '../../../subgraphs/features/offline.js';
import { loadWorld, saveWorld, worldFolder, type WorldManifest } from '../../../subgraphs/features/world-files.js';
import { startFeaturesServer } from '../../support/features.js';

const SEED = 77;
const POLICIES = 300;

let dir: string;
let duck: DuckDBInstance;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'features-world-'));
  duck = await DuckDBInstance.create(':memory:');
});
afterAll(async () => {
  duck.closeSync();
  await rm(dir, { recursive: true, force: true });
});

describe('the generated world as Parquet files', () => {
  it('round-trips exactly: every row and value read back equals the generated world', async () => {
    const world = generateWorld({ seed: SEED, policies: POLICIES });
    expect(await loadWorld(duck, dir, SEED, POLICIES)).toBeNull();
    const folder = await saveWorld(duck, dir, world, POLICIES);
    expect(folder).toBe(worldFolder(dir, SEED, POLICIES));
    expect((await readdir(folder)).sort()).toEqual([
      'claim_reports.parquet',
      'claims.parquet',
      'labels.parquet',
      'manifest.json',
      'policy_claims_snapshots.parquet',
      'policy_versions.parquet',
    ]);
    const loaded = await loadWorld(duck, dir, SEED, POLICIES);
    expect(loaded).toEqual(world);
    // No temporary folder is left behind.
    expect((await readdir(dir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('stores instants as UTC timestamps that any Parquet reader sees as such, with the manifest counts', async () => {
    const folder = worldFolder(dir, SEED, POLICIES);
    const manifest = JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8')) as WorldManifest;
    const conn = await duck.connect();
    try {
      const types = await conn.runAndReadAll(
        `SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('${join(folder, 'policy_versions.parquet')}'))`,
      );
      const byName = Object.fromEntries(types.getRowsJS().map(([n, t]) => [n, t]));
      expect(byName).toMatchObject({
        policy_id: 'VARCHAR',
        feature_timestamp: 'TIMESTAMP WITH TIME ZONE',
        valid_to: 'TIMESTAMP WITH TIME ZONE',
        risk_score: 'DOUBLE',
      });
      const counts = await conn.runAndReadAll(
        `SELECT (SELECT count(*) FROM read_parquet('${join(folder, 'labels.parquet')}')), (SELECT count(DISTINCT policy_id) FROM read_parquet('${join(folder, 'policy_versions.parquet')}') WHERE valid_to IS NULL)`,
      );
      const [labels, current] = counts.getRowsJS()[0]!.map(Number);
      expect(labels).toBe(manifest.rows.labels);
      // SCD type 2: every policy has an open version (valid_to null; a late correction repeats it).
      expect(current).toBe(POLICIES);
    } finally {
      conn.closeSync();
    }
    expect(manifest).toMatchObject({ seed: SEED, policies: POLICIES, format: 'ops-supergraph features world' });
  });

  it('a second writer of the same world keeps the first folder and fails nothing', async () => {
    const world = generateWorld({ seed: SEED, policies: POLICIES });
    const before = await readFile(join(worldFolder(dir, SEED, POLICIES), 'manifest.json'), 'utf8');
    await saveWorld(duck, dir, world, POLICIES);
    expect(await readFile(join(worldFolder(dir, SEED, POLICIES), 'manifest.json'), 'utf8')).toBe(before);
  });

  it('a folder whose files do not hold the rows of its manifest is an error, never half used', async () => {
    const other = await mkdtemp(join(tmpdir(), 'features-world-bad-'));
    try {
      await saveWorld(duck, other, generateWorld({ seed: 5, policies: 40 }), 40);
      const manifestPath = join(worldFolder(other, 5, 40), 'manifest.json');
      const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as WorldManifest;
      manifest.rows.claims += 1;
      await writeFile(manifestPath, JSON.stringify(manifest));
      await expect(loadWorld(duck, other, 5, 40)).rejects.toThrow(/claims\.parquet holds \d+ rows, its manifest \d+/);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  it('the offline store writes the world on its first start and reads it on the next, with identical frames', async () => {
    const own = await mkdtemp(join(tmpdir(), 'features-offline-'));
    try {
      const first = await OfflineStore.open({ seed: 91, policies: 120, dir: own });
      expect(first.storage).toEqual({ kind: 'parquet-written', folder: worldFolder(own, 91, 120) });
      const rows = labelSetRows(first.labelRows('underwriting'));
      const views = ['policy_profile', 'policy_claims_history'];
      const a = await first.frame(rows, views, 'BOTH');
      first.close();
      const second = await OfflineStore.open({ seed: 91, policies: 120, dir: own });
      expect(second.storage.kind).toBe('parquet-read');
      const b = await second.frame(rows, views, 'BOTH');
      second.close();
      expect(b.comparison?.mismatches).toBe(0);
      expect(b.columns).toEqual(a.columns);
      expect(b.values).toEqual(a.values);
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  });

  it('a server with FEATURES_DATA_DIR keeps the world there, and its health says where it came from', async () => {
    const own = await mkdtemp(join(tmpdir(), 'features-server-'));
    try {
      const env = { FEATURES_SEED: '92', FEATURES_POLICIES: '60', FEATURES_DATA_DIR: own };
      const server = await startFeaturesServer({ backend: 'pglite', mode: 'one-process', env });
      const frame = await fetch(`${server.url}/features/pit-training`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ label_set: 'underwriting', limit: 5 }),
      });
      expect(frame.status).toBe(200);
      const health = (await (await fetch(`${server.url}/features/health`)).json()) as { checks: { duckdb: { detail: string } } };
      expect(health.checks.duckdb.detail).toBe(`in-process, in-memory; world written to ${worldFolder(own, 92, 60)}`);
      await server.close();
      const again = await startFeaturesServer({ backend: 'pglite', mode: 'one-process', env });
      await fetch(`${again.url}/features/pit-training`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ label_set: 'underwriting', limit: 5 }),
      });
      const after = (await (await fetch(`${again.url}/features/health`)).json()) as { checks: { duckdb: { detail: string } } };
      expect(after.checks.duckdb.detail).toBe(`in-process, in-memory; world read from ${worldFolder(own, 92, 60)}`);
      await again.close();
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  });
});
