import type { SubgraphModule } from '../platform/subgraph.js';
import { bonding } from './bonding/index.js';
import { features } from './features/index.js';
import { optimization } from './optimization/index.js';
import { prediction } from './prediction/index.js';
import { rental } from './rental/index.js';

/** Every subgraph of the supergraph, in composition order. A new subgraph is a folder plus a line here. */
export const subgraphs: readonly SubgraphModule[] = [rental, prediction, bonding, features, optimization];
