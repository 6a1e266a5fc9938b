import { configSection } from '../../platform/config.js';

/** The prediction subgraph reads no variable: its models are files of its own (subgraphs/prediction/models). */
export const predictionConfig = configSection('prediction', 'subgraphs/prediction/config.ts', {});
