import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The checked-in supergraph (`npm run compose` writes it; the gateway serves it unless SUPERGRAPH_FILE says otherwise). */
export const SUPERGRAPH_PATH = fileURLToPath(new URL('./supergraph.graphql', import.meta.url));

/** The checked-in supergraph's SDL: read without loading composition (a start does not compose). */
export function readCheckedInSupergraph(): string {
  return readFileSync(SUPERGRAPH_PATH, 'utf8');
}
