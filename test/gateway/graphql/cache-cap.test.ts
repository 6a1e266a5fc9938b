import { buildSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CachePolicies } from '../../../gateway/graphql/cache-policy.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';

/*
 * How long a state cache entry of a subgraph fetch may live by the supergraph's `@cacheControl` hints: the
 * least maxAge of the hinted fields it selects, through root fields and `_entities` fragments; none when no
 * field it selects is hinted.
 */
describe('the @cacheControl cap of a subgraph fetch', () => {
  const sdl = readCheckedInSupergraph();
  const policies = new CachePolicies(sdl, buildSchema(sdl, { assumeValidSDL: true }));

  it('is the least hint of the fields it selects', () => {
    expect(policies.capOf('query Q__features__0 { featureViews { name } }')).toBe(60);
    expect(policies.capOf('query Q__features__0 { featureViews { name } featureImportance { model } }')).toBe(60);
    expect(policies.capOf('query Q__rental__0 { quoteSigningKeys { kid } }')).toBe(300);
  });

  it('follows fragments, and is none where nothing selected is hinted', () => {
    expect(policies.capOf('query Q__features__0 { ...F } fragment F on Query { featureImportance { model } }')).toBe(300);
    expect(policies.capOf('query Q__rental__0 { machines { id status } fleetSummary { available } }')).toBeNull();
    expect(policies.capOf('query($r: [_Any!]!) { _entities(representations: $r) { ... on Booking { id status } } }')).toBeNull();
  });

  it('is zero for a document that does not parse', () => {
    expect(policies.capOf('query {')).toBe(0);
  });
});
