import Negotiator from 'negotiator';

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

/** The media types of a whole GraphQL answer, in Apollo Server's order of preference. */
const ANSWER_TYPES = [
  'application/json; charset=utf-8',
  'application/graphql-response+json; charset=utf-8',
  'application/json; callbackSpec=1.0; charset=utf-8',
] as const;

/** Accept headers seen, with the type each chose; clients send few distinct ones. */
const answerTypes = new Map<string, string | null>();
const MAX_ANSWER_TYPES = 256;

/**
 * The media type a whole GraphQL answer is sent as for this Accept header, negotiated as Apollo Server
 * negotiates it (`chooseContentTypeForSingleResultResponse`): JSON when there is no header, null when it
 * allows none of the three.
 */
export function graphQLAnswerType(accept: string | undefined): string | null {
  if (!accept) return ANSWER_TYPES[0];
  let chosen = answerTypes.get(accept);
  if (chosen === undefined) {
    chosen = new Negotiator({ headers: { accept } }).mediaType(ANSWER_TYPES) ?? null;
    if (answerTypes.size >= MAX_ANSWER_TYPES) answerTypes.clear();
    answerTypes.set(accept, chosen);
  }
  return chosen;
}

/**
 * Whether an `Accept` header prefers a page to a GraphQL answer: a browser navigating (`text/html,...`) does,
 * a GraphQL client (JSON, or nothing named) does not.
 */
export function prefersPage(accept: string | undefined): boolean {
  if (!accept) return false;
  return new Negotiator({ headers: { accept } }).mediaType(['application/graphql-response+json', 'application/json', 'text/html']) === 'text/html';
}
