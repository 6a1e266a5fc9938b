// @ts-check
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/*
 * What `npm start` runs, made ahead of it (`npm run build`; `npm ci` runs it as part of the prepare script):
 *
 * - the server compiled: the gateway and every subgraph bundled by esbuild into .build/server/ (packages stay
 *   in node_modules, imported as they are). Starting it needs no TypeScript loader: tsx's per-module hooks
 *   and transpiling cost a second start about a second (docs/performance.md, "Start").
 * - a PGlite cluster: what PGlite's initdb makes before any migration, the same for every database. A new
 *   DATA_DIR starts as a copy of it (platform/pglite-cluster.ts) instead of running initdb, 3 s of a fresh
 *   start. Nothing of this install's data is in it: migrations, keys and the database's identity are made in
 *   each data directory at its first start.
 * - the API reference page's renderer (RapiDoc, MIT): its prebuilt bundle, taken from the npm registry's
 *   tarball of one pinned version whose integrity is checked, into .build/api-reference/. Only that file: the
 *   package's own dependencies (a parser chain with native tree-sitter builds and an install-analytics
 *   package) build RapiDoc from source and are never installed.
 *
 * A module's `import.meta.url` is kept its source file's URL in the bundle, so every file found beside a
 * module (migrations, models, the schema, the dashboard) is found as under tsx.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const serverDir = join(root, '.build', 'server');
const inputsFile = join(serverDir, 'inputs.json');
/** The two servers of the project: `npm start` and `npm run subgraph`. */
const entryPoints = { main: join(root, 'gateway/main.ts'), subgraph: join(root, 'gateway/subgraph-main.ts') };
/** Files that change how every module compiles, beside the inputs esbuild reports. */
const settings = ['package.json', 'tsconfig.json', 'tools/build.mjs'].map((f) => join(root, f));

const CLUSTER_DIR = join(root, '.build', 'pglite-cluster');

/** The compiled module of an entry point (`main` or `subgraph`). */
export function serverModule(entry) {
  return pathToFileURL(join(serverDir, `${entry}.js`)).href;
}

/** @typedef {{ path: string; mtimeMs: number; size: number }} InputStamp */

/** @param {string} path @returns {InputStamp | null} */
function stampOf(path) {
  try {
    const s = statSync(path);
    return { path, mtimeMs: s.mtimeMs, size: s.size };
  } catch {
    return null;
  }
}

/**
 * True when the compiled server is missing or any file it was compiled from changed since (its size or
 * modification time), or was removed: a few hundred stat calls, milliseconds.
 */
export function serverStale() {
  if (!existsSync(inputsFile)) return true;
  /** @type {InputStamp[]} */
  let inputs;
  try {
    inputs = JSON.parse(readFileSync(inputsFile, 'utf8'));
  } catch {
    return true;
  }
  return inputs.some((input) => {
    const now = stampOf(input.path);
    return !now || now.mtimeMs !== input.mtimeMs || now.size !== input.size;
  });
}

/** Compiles the server into .build/server/ (whole, then moved into place: a start never sees half of one). */
export async function buildServer() {
  const esbuild = await import('esbuild');
  const staging = `${serverDir}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  /** @type {import('esbuild').Plugin} */
  const sourceUrls = {
    name: 'source-urls',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async (args) => {
        let contents = await readFile(args.path, 'utf8');
        if (contents.includes('import.meta.url')) {
          // Chunks sit in .build/server/, two levels below the root: the source's URL relative to them.
          const fromChunk = relative(serverDir, args.path).split('\\').join('/');
          contents = contents.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromChunk)}, import.meta.url).href`);
        }
        return { contents, loader: 'ts' };
      });
    },
  };
  const result = await esbuild.build({
    entryPoints,
    outdir: staging,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning',
    plugins: [sourceUrls],
  });
  const inputs = [...Object.keys(result.metafile.inputs).map((p) => join(root, p)), ...settings].map(stampOf).filter((s) => s !== null);
  writeFileSync(join(staging, 'inputs.json'), JSON.stringify(inputs));
  writeFileSync(join(staging, 'package.json'), '{ "type": "module" }\n');
  // Swapped by two renames: a start that reads the build meanwhile finds one whole build or the other.
  const old = `${serverDir}.old-${process.pid}`;
  if (existsSync(serverDir)) renameSync(serverDir, old);
  renameSync(staging, serverDir);
  rmSync(old, { recursive: true, force: true });
  return inputs.length;
}

/** The installed PGlite's version (a cluster made by another one is not used). */
function pgliteVersion() {
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  return JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')).version;
}

/** Makes the PGlite cluster a new DATA_DIR starts from, unless this PGlite version already made it. */
export async function buildCluster() {
  const version = pgliteVersion();
  const marker = join(CLUSTER_DIR, 'ops-supergraph-cluster.json');
  if (existsSync(marker) && JSON.parse(readFileSync(marker, 'utf8')).pglite === version) return false;
  const { PGlite } = await import('@electric-sql/pglite');
  const staging = `${CLUSTER_DIR}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(dirname(staging), { recursive: true });
  const db = await PGlite.create(staging);
  await db.close();
  writeFileSync(join(staging, 'ops-supergraph-cluster.json'), JSON.stringify({ pglite: version }));
  rmSync(CLUSTER_DIR, { recursive: true, force: true });
  renameSync(staging, CLUSTER_DIR);
  return true;
}

/** The renderer /docs serves: one version, its registry tarball's integrity pinned (npm view rapidoc@9.3.8 dist.integrity). */
const RAPIDOC = {
  version: '9.3.8',
  integrity: 'sha512-eCYEbr1Xr8OJZvVCw8SXl9zBCRoLJbhNGuG5IZTHq/RWAOq/O4MafUCuFEyZHsrhLrlUcGZMa64pyhpib8fQKQ==',
};
const API_REFERENCE_DIR = join(root, '.build', 'api-reference');

/**
 * Puts RapiDoc's prebuilt bundle (and its licence) in .build/api-reference/, unless this version is there:
 * `npm pack` fetches the tarball from the registry (or npm's cache) without installing anything, its
 * integrity is checked, and the two files are taken out of it. Throws saying what to do when it cannot.
 */
export function buildApiReference() {
  const marker = join(API_REFERENCE_DIR, 'rapidoc.json');
  if (existsSync(marker) && JSON.parse(readFileSync(marker, 'utf8')).version === RAPIDOC.version) return false;
  const work = mkdtempSync(join(tmpdir(), 'ops-supergraph-rapidoc-'));
  const staging = `${API_REFERENCE_DIR}.tmp-${process.pid}`;
  try {
    try {
      execFileSync('npm', ['pack', `rapidoc@${RAPIDOC.version}`, '--loglevel=error', '--pack-destination', work], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (error) {
      const said = error instanceof Error && 'stderr' in error ? String(error.stderr).split('\n') : [];
      const reason =
        said.find((line) => /npm error (code|errno|request|network)/.test(line))?.replace(/^npm error /, '') ??
        (error instanceof Error ? error.message : String(error));
      throw new Error(`rapidoc@${RAPIDOC.version} could not be fetched from the npm registry or npm's cache (${reason}): run \`npm run build\` with network`, {
        cause: error,
      });
    }
    const tarball = join(work, `rapidoc-${RAPIDOC.version}.tgz`);
    const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
    if (integrity !== RAPIDOC.integrity)
      throw new Error(`rapidoc@${RAPIDOC.version}: the tarball's integrity is ${integrity}, not the pinned ${RAPIDOC.integrity}`);
    execFileSync('tar', ['xzf', tarball, '-C', work, 'package/dist/rapidoc-min.js', 'package/dist/rapidoc-min.js.LICENSE.txt', 'package/LICENSE.txt']);
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    copyFileSync(join(work, 'package/dist/rapidoc-min.js'), join(staging, 'rapidoc-min.js'));
    copyFileSync(join(work, 'package/LICENSE.txt'), join(staging, 'LICENSE.txt'));
    // The licences of what the bundle contains.
    copyFileSync(join(work, 'package/dist/rapidoc-min.js.LICENSE.txt'), join(staging, 'rapidoc-min.js.LICENSE.txt'));
    writeFileSync(join(staging, 'rapidoc.json'), JSON.stringify(RAPIDOC));
    rmSync(API_REFERENCE_DIR, { recursive: true, force: true });
    renameSync(staging, API_REFERENCE_DIR);
    return true;
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now();
  const files = await buildServer();
  const server = performance.now();
  const made = await buildCluster();
  const cluster = performance.now();
  /** @type {string} */
  let reference;
  try {
    reference = buildApiReference() ? `fetched in ${(performance.now() - cluster).toFixed(0)} ms` : 'already there';
  } catch (error) {
    // Everything else serves without it; /docs says what is missing.
    reference = 'missing';
    console.warn(`API reference renderer not built: ${error instanceof Error ? error.message : String(error)}`);
  }
  console.log(
    `server compiled from ${files} files in ${(server - started).toFixed(0)} ms; PGlite cluster ${made ? `made in ${(cluster - server).toFixed(0)} ms` : 'already made'}; API reference renderer ${reference} (.build/)`,
  );
}
