import type { SubgraphModule } from '../platform/subgraph.js';
import { optimization } from './optimization/index.js';
import { prediction } from './prediction/index.js';
import { rental } from './rental/index.js';

/** Every subgraph of the supergraph, in composition order. A new subgraph is a folder plus a line here. */
export const subgraphs: readonly SubgraphModule[] = [rental, prediction, optimization];
