/** Whether a Node version is inside an `engines.node` range of `^M.m.p` and `>=M` parts (tools/node-range.mjs). */
export function nodeInRange(version: string, range: string): boolean;
