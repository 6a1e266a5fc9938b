import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { composeServices } from '@apollo/composition';
import { parse } from 'graphql';
import { readSubgraphSdl } from '../platform/subgraph.js';
import { subgraphNames, defaultSubgraphUrl } from './subgraphs.js';

export const SUPERGRAPH_PATH = fileURLToPath(new URL('./supergraph.graphql', import.meta.url));

/** Composes `schema/<name>.graphql` of every subgraph into the supergraph SDL. */
export function composeSupergraph(): string {
  const result = composeServices(
    subgraphNames.map((name) => ({ name, typeDefs: parse(readSubgraphSdl(name)), url: defaultSubgraphUrl(name) })),
  );
  if (result.errors) {
    throw new Error(`Composition failed:\n${result.errors.map((e) => `  - ${e.message}`).join('\n')}`);
  }
  return `${result.supergraphSdl.trimEnd()}\n`;
}

export function readCheckedInSupergraph(): string {
  return readFileSync(SUPERGRAPH_PATH, 'utf8');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(SUPERGRAPH_PATH, composeSupergraph());
  console.log(`wrote ${SUPERGRAPH_PATH}`);
}
