/** The media types a GraphQL answer is sent as, and the ranges that include one of them. */
const GRAPHQL_TYPES = new Set(['application/graphql-response+json', 'application/json', 'application/*', '*/*']);

/**
 * Whether an `Accept` header allows a GraphQL answer: absent, or naming one of its types (or a range that
 * includes one) with a non-zero quality. A browser navigating to /graphql (`text/html,...;q=0.9`
 * without `*\/*`) is not, and gets 406: there is no browser page.
 */
export function acceptsGraphQLResponse(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((part) => {
    const [type = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!GRAPHQL_TYPES.has(type)) return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
