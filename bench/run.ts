import { argv, exit } from 'node:process';
import { productionModeUnlessSet } from '../gateway/http/process.js';

/** `npm run bench -- <name>`: runs bench/<name>.ts, whose default export is the benchmark. */
const name = argv[2];
if (!name || !/^[a-z][a-z0-9-]*$/.test(name)) {
  console.error('usage: npm run bench -- <name>   (e.g. prediction, subscriptions, flood, bonding, features, optimization)');
  exit(2);
}
// Measured as served: the servers a benchmark starts run the way `npm start` runs them.
productionModeUnlessSet();
const mod = (await import(`./${name}.js`).catch(() => null)) as { default?: () => Promise<void> } | null;
if (!mod?.default) {
  console.error(`no benchmark named "${name}" (expected bench/${name}.ts)`);
  exit(2);
}
await mod.default();
