import { describe, expect, it } from 'vitest';
import { generateOperationTypes, generateSchemaTypes, readOperationTypes, readSchemaTypes } from '../../../tools/codegen.js';
import { composeSupergraph } from '../../../schema/compose.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { subgraphNames } from '../../../schema/subgraphs.js';

describe('schema/supergraph.graphql', () => {
  it('is what `npm run compose` makes of schema/*.graphql (run it after changing a subgraph schema)', () => {
    expect(readCheckedInSupergraph()).toBe(composeSupergraph());
  });
});

describe('subgraphs/<name>/schema-types.ts and operation-types.ts', () => {
  it.each(subgraphNames)('%s: is what `npm run codegen` makes of its SDL (run it after changing a subgraph schema)', async (name) => {
    expect(readSchemaTypes(name)).toBe(await generateSchemaTypes(name));
    expect(readOperationTypes(name)).toBe(await generateOperationTypes(name));
  });
});
