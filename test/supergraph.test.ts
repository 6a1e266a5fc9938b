import { describe, expect, it } from 'vitest';
import { composeSupergraph, readCheckedInSupergraph } from '../schema/compose.js';

describe('schema/supergraph.graphql', () => {
  it('is what `npm run compose` makes of schema/*.graphql (run it after changing a subgraph schema)', () => {
    expect(readCheckedInSupergraph()).toBe(composeSupergraph());
  });
});
