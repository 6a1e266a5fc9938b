// @ts-check
import { readFileSync } from 'node:fs';
import { nodeInRange } from './node-range.mjs';

/*
 * Imported first by `npm start` and `npm run subgraph` (tools/start.mjs), before anything a newer Node may be
 * needed for: a Node outside package.json `engines` stops here with what to do, never with a stack trace
 * from deeper in. Node 24 LTS is the runtime the project is built and tested on; 20 and 22 still run it,
 * and 20, past its end of life (2026-04-30), is named as such.
 */
const LTS = 24;
const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const major = Number(process.versions.node.split('.')[0]);
const accepted = nodeInRange(process.versions.node, String(engines.node));
if (!accepted) {
  console.error(
    `ops-supergraph needs Node ${engines.node} (Node ${LTS} LTS is the one it is built and tested on); this is Node ${process.version}. ` +
      `Install Node ${LTS} (https://nodejs.org/en/download, or a version manager: \`nvm install ${LTS}\`, \`fnm use ${LTS}\`; docs/operations.md, "Which Node").`,
  );
  process.exit(1);
}
if (major < 22) {
  console.error(
    `ops-supergraph: Node ${process.version} is past its end of life (2026-04-30): it runs, but Node ${LTS} LTS is the supported runtime (docs/operations.md, "Which Node").`,
  );
}
