import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DOUBLE, DuckDBDataChunk, INTEGER, VARCHAR, type DuckDBConnection, type DuckDBInstance, type DuckDBType } from '@duckdb/node-api';
import {
  GENERATOR_VERSION,
  type Claim,
  type ClaimReportRow,
  type LabelRow,
  type ModelName,
  type PolicyVersion,
  type SnapshotRow,
  type World,
} from './generator.js';

/**
 * The generated world as Parquet files, one folder per (seed, policies, generator version):
 * `<dir>/world-<seed>-<policies>-v<version>/` holds `policy_versions`, `claims`, `claim_reports`,
 * `policy_claims_snapshots` and `labels` (`.parquet`, zstd), instants as `TIMESTAMP WITH TIME ZONE`
 * (UTC, millisecond precision), plus `manifest.json` (what was generated, rows per file). A folder
 * is written under a temporary name and renamed into place, so a reader sees it whole or not at all;
 * files are never rewritten. Any tool that reads Parquet (DuckDB, pandas, Spark) can open them.
 */

type Kind = 'varchar' | 'varchar?' | 'double' | 'int' | 'ts' | 'ts?';
interface ColumnSpec<R> {
  name: string;
  kind: Kind;
  get(row: R): string | number | null;
  set(row: Partial<R>, value: string | number | null): void;
}

function col<R, K extends keyof R & string>(name: string, key: K, kind: Kind): ColumnSpec<R> {
  return {
    name,
    kind,
    get: (row) => row[key] as string | number | null,
    set: (row, value) => {
      (row as Record<string, unknown>)[key] = value;
    },
  };
}

const POLICY_VERSIONS: ColumnSpec<PolicyVersion>[] = [
  col('policy_id', 'policyId', 'varchar'),
  col('feature_timestamp', 'featureTs', 'ts'),
  col('created_timestamp', 'createdTs', 'ts'),
  col('valid_from', 'validFrom', 'ts'),
  col('valid_to', 'validTo', 'ts?'),
  col('reason', 'reason', 'varchar'),
  col('driver_age', 'driverAge', 'double'),
  col('vehicle_age_years', 'vehicleAgeYears', 'double'),
  col('vehicle_value', 'vehicleValue', 'double'),
  col('region_risk', 'regionRisk', 'double'),
  col('no_claims_years', 'noClaimsYears', 'double'),
  col('annual_premium', 'annualPremium', 'double'),
  col('risk_score', 'riskScore', 'double'),
];

const CLAIMS: ColumnSpec<Claim>[] = [
  col('claim_id', 'claimId', 'varchar'),
  col('policy_id', 'policyId', 'varchar'),
  col('occurred_at', 'occurredAt', 'ts'),
  col('reported_at', 'reportedAt', 'ts'),
  col('amount', 'amount', 'double'),
  col('police_report', 'policeReport', 'int'),
  col('incident_type', 'incidentType', 'int'),
  col('policy_tenure_days', 'policyTenureDays', 'int'),
  col('fraud', 'fraud', 'int'),
  col('settled_at', 'settledAt', 'ts'),
  col('settlement_amount', 'settlementAmount', 'double'),
  col('investigation_flag', 'investigationFlag', 'int'),
];

const CLAIM_REPORTS: ColumnSpec<ClaimReportRow>[] = [
  col('claim_id', 'claimId', 'varchar'),
  col('feature_timestamp', 'featureTs', 'ts'),
  col('created_timestamp', 'createdTs', 'ts'),
  col('reported_amount', 'reportedAmount', 'double'),
  col('report_lag_days', 'reportLagDays', 'double'),
  col('police_report', 'policeReport', 'int'),
  col('incident_type', 'incidentType', 'int'),
  col('policy_tenure_days', 'policyTenureDays', 'int'),
];

const SNAPSHOTS: ColumnSpec<SnapshotRow>[] = [
  col('policy_id', 'policyId', 'varchar'),
  col('feature_timestamp', 'featureTs', 'ts'),
  col('created_timestamp', 'createdTs', 'ts'),
  col('claims_count_12m', 'claimsCount12m', 'int'),
  col('claims_amount_12m', 'claimsAmount12m', 'double'),
  col('open_claims', 'openClaims', 'int'),
];

type ModelLabel = LabelRow & { model: ModelName };
const LABELS: ColumnSpec<ModelLabel>[] = [
  col('model', 'model', 'varchar'),
  col('policy_id', 'policyId', 'varchar'),
  col('claim_id', 'claimId', 'varchar?'),
  col('event_timestamp', 'eventTs', 'ts'),
  col('label', 'label', 'double'),
];

const FILES = ['policy_versions', 'claims', 'claim_reports', 'policy_claims_snapshots', 'labels'] as const;
type FileName = (typeof FILES)[number];

export interface WorldManifest {
  format: 'ops-supergraph features world';
  seed: number;
  policies: number;
  generator_version: number;
  written_at: string;
  rows: Record<FileName, number>;
}

export const worldFolder = (dir: string, seed: number, policies: number) => join(dir, `world-${seed}-${policies}-v${GENERATOR_VERSION}`);

const CHUNK = 2048;
const duckType = (kind: Kind): DuckDBType => (kind === 'varchar' || kind === 'varchar?' ? VARCHAR : kind === 'int' ? INTEGER : DOUBLE);
const quote = (path: string) => `'${path.replaceAll("'", "''")}'`;
/** The stored type of a column: instants are epoch ms in the working table, timestamps in the file. */
const toFile = (c: { name: string; kind: Kind }) =>
  c.kind === 'ts' || c.kind === 'ts?' ? `make_timestamptz(CAST(${c.name} * 1000 AS BIGINT)) AS ${c.name}` : c.name;
const fromFile = (c: { name: string; kind: Kind }) => (c.kind === 'ts' || c.kind === 'ts?' ? `CAST(epoch_ms(${c.name}) AS DOUBLE) AS ${c.name}` : c.name);

async function writeTable<R>(conn: DuckDBConnection, path: string, columns: readonly ColumnSpec<R>[], rows: readonly R[]): Promise<void> {
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE world_out (${columns.map((c) => `${c.name} ${duckType(c.kind) === VARCHAR ? 'VARCHAR' : duckType(c.kind) === INTEGER ? 'INTEGER' : 'DOUBLE'}`).join(', ')})`,
  );
  const appender = await conn.createAppender('world_out');
  try {
    const types = columns.map((c) => duckType(c.kind));
    for (let offset = 0; offset < rows.length; offset += CHUNK) {
      const slice = rows.slice(offset, offset + CHUNK);
      const chunk = DuckDBDataChunk.create(types, slice.length);
      columns.forEach((c, i) =>
        chunk.setColumnValues(
          i,
          slice.map((r) => c.get(r)),
        ),
      );
      appender.appendDataChunk(chunk);
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
  await conn.run(`COPY (SELECT ${columns.map(toFile).join(', ')} FROM world_out) TO ${quote(path)} (FORMAT parquet, COMPRESSION zstd)`);
  await conn.run('DROP TABLE world_out');
}

async function readTable<R>(conn: DuckDBConnection, path: string, columns: readonly ColumnSpec<R>[]): Promise<R[]> {
  // Chunk by chunk, value by value from the vectors: no intermediate array of DuckDB values per column.
  const result = await conn.stream(`SELECT ${columns.map(fromFile).join(', ')} FROM read_parquet(${quote(path)})`);
  const rows: R[] = [];
  for (;;) {
    const chunk = await result.fetchChunk();
    if (!chunk || chunk.rowCount === 0) break;
    const vectors = columns.map((_, i) => chunk.getColumnVector(i));
    const start = rows.length;
    for (let r = 0; r < chunk.rowCount; r++) rows.push({} as R);
    columns.forEach((c, i) => {
      const vector = vectors[i]!;
      for (let r = 0; r < chunk.rowCount; r++) {
        const v = vector.getItem(r);
        c.set(rows[start + r]!, v === null ? null : typeof v === 'string' || typeof v === 'number' ? v : Number(v));
      }
    });
  }
  return rows;
}

/** Writes the world's folder (atomically: a temporary folder renamed into place). */
export async function saveWorld(instance: DuckDBInstance, dir: string, world: World, policies: number): Promise<string> {
  const folder = worldFolder(dir, world.seed, policies);
  const tmp = `${folder}.tmp-${process.pid}-${Date.now()}`;
  await mkdir(tmp, { recursive: true });
  const labels: ModelLabel[] = (['underwriting', 'pricing', 'fraud'] as const).flatMap((model) => world.labels[model].map((l) => ({ ...l, model })));
  const conn = await instance.connect();
  try {
    await writeTable(conn, join(tmp, 'policy_versions.parquet'), POLICY_VERSIONS, world.policyVersions);
    await writeTable(conn, join(tmp, 'claims.parquet'), CLAIMS, world.claims);
    await writeTable(conn, join(tmp, 'claim_reports.parquet'), CLAIM_REPORTS, world.claimReports);
    await writeTable(conn, join(tmp, 'policy_claims_snapshots.parquet'), SNAPSHOTS, world.snapshots);
    await writeTable(conn, join(tmp, 'labels.parquet'), LABELS, labels);
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw error;
  } finally {
    conn.closeSync();
  }
  const manifest: WorldManifest = {
    format: 'ops-supergraph features world',
    seed: world.seed,
    policies,
    generator_version: GENERATOR_VERSION,
    written_at: new Date().toISOString(),
    rows: {
      policy_versions: world.policyVersions.length,
      claims: world.claims.length,
      claim_reports: world.claimReports.length,
      policy_claims_snapshots: world.snapshots.length,
      labels: labels.length,
    },
  };
  await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  try {
    await rename(tmp, folder);
  } catch (error) {
    // Another process wrote the same world first: its folder is as good as this one.
    await rm(tmp, { recursive: true, force: true });
    if (!(await readManifest(folder))) throw error;
  }
  return folder;
}

async function readManifest(folder: string): Promise<WorldManifest | null> {
  try {
    return JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8')) as WorldManifest;
  } catch {
    return null;
  }
}

/**
 * Reads the world of (seed, policies) from its folder, or null when there is none. A folder whose files do
 * not hold the rows its manifest names is an error (a damaged store is reported, never half used).
 */
export async function loadWorld(instance: DuckDBInstance, dir: string, seed: number, policies: number): Promise<World | null> {
  const folder = worldFolder(dir, seed, policies);
  const manifest = await readManifest(folder);
  if (!manifest) return null;
  const conn = await instance.connect();
  try {
    const file = (name: FileName) => join(folder, `${name}.parquet`);
    const policyVersions = await readTable(conn, file('policy_versions'), POLICY_VERSIONS);
    const claims = await readTable(conn, file('claims'), CLAIMS);
    const claimReports = await readTable(conn, file('claim_reports'), CLAIM_REPORTS);
    const snapshots = await readTable(conn, file('policy_claims_snapshots'), SNAPSHOTS);
    const labelRows = await readTable(conn, file('labels'), LABELS);
    const counts: Record<FileName, number> = {
      policy_versions: policyVersions.length,
      claims: claims.length,
      claim_reports: claimReports.length,
      policy_claims_snapshots: snapshots.length,
      labels: labelRows.length,
    };
    for (const name of FILES) {
      if (counts[name] !== manifest.rows[name])
        throw new Error(`features world ${folder}: ${name}.parquet holds ${counts[name]} rows, its manifest ${manifest.rows[name]}`);
    }
    const labels: Record<ModelName, LabelRow[]> = { underwriting: [], pricing: [], fraud: [] };
    for (const { model, ...row } of labelRows) labels[model].push(row);
    const pad = (n: number) => String(n).padStart(6, '0');
    return {
      seed,
      policyIds: Array.from({ length: policies }, (_, i) => `P-${pad(i + 1)}`),
      claimIds: claims.map((c) => c.claimId),
      policyVersions,
      claims,
      claimReports,
      snapshots,
      labels,
    };
  } finally {
    conn.closeSync();
  }
}
