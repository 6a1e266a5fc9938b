import { env } from 'node:process';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner } from '../../platform/principal.js';

/*
 * Hive Gateway's configuration in `npm run bench -- gateway` (`--config-path`; Hive's CLI loads it with its
 * own TypeScript importer). The subgraph servers serve only calls signed with PRINCIPAL_SECRET, so a plugin
 * signs each subgraph call (the demo principal, as the project's gateway sends in demo mode) with the
 * project's own PrincipalSigner, over the exact body sent: every gateway compared pays the same signing
 * work per call. SUBGRAPH_URLS (`name=url,...`, as the project's gateway is given) names the subgraph each
 * URL serves. HIVE_DEDUPLICATE_INFLIGHT_REQUESTS=false: the "nothing shared" variant, its HTTP transport's
 * deduplication of identical subgraph requests in flight off (it deduplicates before the fetch this signs).
 */

const signer = PrincipalSigner.from(env['PRINCIPAL_SECRET']);
if (!signer) throw new Error('PRINCIPAL_SECRET: needed to sign the calls to the subgraph servers (the benchmark sets it)');

/** The subgraph each URL serves. */
const subgraphOf = new Map(
  (env['SUBGRAPH_URLS'] ?? '')
    .split(',')
    .filter((pair) => pair.includes('='))
    .map((pair) => {
      const at = pair.indexOf('=');
      return [pair.slice(at + 1), pair.slice(0, at)] as const;
    }),
);

/** The part of Hive's `onFetch` payload this plugin reads and sets. */
interface FetchOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
}
interface OnFetchPayload {
  url: string;
  options: FetchOptions;
  setOptions: (options: FetchOptions) => void;
}

const signSubgraphCalls = {
  onFetch({ url, options, setOptions }: OnFetchPayload): void {
    const subgraph = subgraphOf.get(url);
    // Not a subgraph call (none is expected here): sent as it is.
    if (!subgraph) return;
    const { body = '' } = options;
    if (typeof body !== 'string') throw new Error(`cannot sign a call to subgraph ${subgraph} whose body is not text`);
    const { pathname, search } = new URL(url);
    const principal = signer.sign(DEMO_PRINCIPAL, {
      subgraph,
      method: options.method ?? 'GET',
      path: `${pathname}${search}`,
      body,
      idempotencyKey: options.headers?.['idempotency-key'],
    });
    setOptions({ ...options, headers: { ...options.headers, [PRINCIPAL_HEADER]: principal } });
  },
};

export const gatewayConfig = {
  plugins: () => [signSubgraphCalls],
  ...(env['HIVE_DEDUPLICATE_INFLIGHT_REQUESTS'] === 'false' ? { transportEntries: { '*.http': { options: { deduplicateInflightRequests: false } } } } : {}),
};
