export interface JsonResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

/** A REST call with a JSON body (or a raw string, to send malformed JSON). */
export async function rest<T = Record<string, any>>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonResponse<T>> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${baseUrl}${path}`, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as T };
}

export interface GraphQLResult<D = Record<string, any>> {
  status: number;
  /** The answer's headers (not enumerable, so results still compare by status and body). */
  readonly headers: Headers;
  data?: D | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, any> }[];
}

export async function gql<D = Record<string, any>>(
  baseUrl: string,
  query: string,
  variables: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<GraphQLResult<D>> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as Omit<GraphQLResult<D>, 'status' | 'headers'>;
  return Object.defineProperty({ status: res.status, ...body }, 'headers', { value: res.headers, enumerable: false }) as GraphQLResult<D>;
}

/** A start time `hours` from now, ISO 8601 UTC. */
export const hoursFromNow = (hours: number, now = Date.now()) => new Date(now + hours * 3_600_000).toISOString();
