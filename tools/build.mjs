// @ts-check
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
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

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now();
  const files = await buildServer();
  const server = performance.now();
  const made = await buildCluster();
  console.log(
    `server compiled from ${files} files in ${(server - started).toFixed(0)} ms; PGlite cluster ${made ? `made in ${(performance.now() - server).toFixed(0)} ms` : 'already made'} (.build/)`,
  );
}
