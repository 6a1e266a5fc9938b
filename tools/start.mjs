// @ts-check
// First: a Node outside package.json `engines` stops with what to do (imports are evaluated in order).
import './node-check.mjs';
import { fileURLToPath } from 'node:url';
import { buildServer, serverModule, serverStale } from './build.mjs';
import { missingPackage, missingPackageMessage } from '../platform/missing-package.mjs';

/*
 * `npm start` (`main`) and `npm run subgraph` (`subgraph`): the compiled server (tools/build.mjs), compiled
 * again first when a file it was compiled from changed since (a checkout, an edit), so what runs is always
 * the tree as it is. Source maps are on: stack traces name the TypeScript files and lines.
 */
// The entry's name, when given, is taken off the arguments: the server reads the rest (`subgraph rental`).
const entry = ['main', 'subgraph'].includes(process.argv[2] ?? '') ? process.argv.splice(2, 1)[0] : 'main';
if (serverStale()) {
  const started = performance.now();
  const files = await buildServer();
  console.error(
    `ops-supergraph: compiled the server from ${files} files in ${(performance.now() - started).toFixed(0)} ms (a source changed since the last build)`,
  );
}
process.setSourceMapsEnabled(true);
// WebAssembly (PGlite, z3) is compiled at once by V8's baseline compiler, and a function is recompiled
// optimized once it has run for a budget. With V8's default budget the optimizing compiler recompiles
// most of PostgreSQL's start-up code, which runs once: a second of CPU on two cores while the server
// starts. About eight times the default leaves code that runs once alone and still optimizes what
// queries run (docs/performance.md, "Start"). Set before any module is compiled, on the Nodes whose V8
// default was measured: Node 24's 13,000,000 and Node 20's 1,800,000 (Node 22 keeps its own).
const node = Number(process.versions.node.split('.')[0]);
const tieringBudget = node >= 24 ? 100_000_000 : node === 20 ? 14_000_000 : null;
if (tieringBudget) (await import('node:v8')).setFlagsFromString(`--wasm-tiering-budget=${tieringBudget}`);
// Node 22.1+ keeps V8's compiled code of every module loaded on disk (.build/compile-cache, or
// NODE_COMPILE_CACHE): a second start reads it instead of compiling the server and its packages again.
// Node 20 has no such cache and skips it.
const { enableCompileCache } = /** @type {{ enableCompileCache?: (dir: string) => unknown }} */ (await import('node:module')).default;
enableCompileCache?.(process.env['NODE_COMPILE_CACHE'] || fileURLToPath(new URL('../.build/compile-cache', import.meta.url)));
try {
  await import(serverModule(entry));
} catch (error) {
  const name = missingPackage(error);
  if (!name) throw error;
  console.error(`ops-supergraph cannot start: ${missingPackageMessage(name)}`);
  process.exit(1);
}
