import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The cluster `npm run build` makes (tools/build.mjs): what PGlite's initdb makes, before any migration. */
const CLUSTER_DIR = fileURLToPath(new URL('../.build/pglite-cluster/', import.meta.url));
const MARKER = 'ops-supergraph-cluster.json';

/** The version of the PGlite installed beside this code. */
function installedPglite(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  return (JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * Gives a PGlite data directory that holds no cluster yet (no PG_VERSION) a copy of the cluster made at
 * build, when the installed PGlite made it: PGlite then opens it instead of running initdb (about 3 s of a
 * fresh start, docs/performance.md). Called with the directory's lock held. PG_VERSION is copied last, so
 * a copy cut short is made again at the next start. False when there was nothing to do or no usable cluster
 * (PGlite then runs initdb, as without a build).
 */
export function seedFromCluster(dataDir: string): boolean {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return false;
  const marker = join(CLUSTER_DIR, MARKER);
  if (!existsSync(marker)) return false;
  let made: { pglite?: unknown };
  try {
    made = JSON.parse(readFileSync(marker, 'utf8')) as { pglite?: unknown };
  } catch {
    return false; // a marker cut short: the cluster is not trusted, initdb runs
  }
  if (made.pglite !== installedPglite()) return false;
  for (const entry of readdirSync(CLUSTER_DIR)) {
    if (entry === 'PG_VERSION' || entry === MARKER) continue;
    cpSync(join(CLUSTER_DIR, entry), join(dataDir, entry), { recursive: true, force: true });
  }
  cpSync(join(CLUSTER_DIR, 'PG_VERSION'), join(dataDir, 'PG_VERSION'));
  return true;
}
