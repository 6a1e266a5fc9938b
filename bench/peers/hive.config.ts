import { env } from 'node:process';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner, type Principal } from '../../platform/principal.js';

/*
 * Hive Gateway's configuration in `npm run bench -- gateway` (`--config-path`; Hive's CLI loads it with its
 * own TypeScript importer). The subgraph servers serve only calls signed with PRINCIPAL_SECRET, so a plugin
 * signs each subgraph call (the demo principal, as the project's gateway sends in demo mode) with the
 * project's own PrincipalSigner, over the exact body sent: every gateway compared pays the same signing
 * work per call. SUBGRAPH_URLS (`name=url,...`, as the project's gateway is given) names the subgraph each
 * URL serves; bench/peers/hive-cache.config.ts signs with the principal of each request's API key instead.
 * HIVE_DEDUPLICATE_INFLIGHT_REQUESTS=false: the "nothing shared" variant, its HTTP transport's
 * deduplication of identical subgraph requests in flight off (it deduplicates before the fetch this signs).
 */

function signerOf(secret: string | undefined): PrincipalSigner {
  const signer = PrincipalSigner.from(secret);
  if (!signer) throw new Error('PRINCIPAL_SECRET: needed to sign the calls to the subgraph servers (the benchmark sets it)');
  return signer;
}

const signer = signerOf(env['PRINCIPAL_SECRET']);

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
/** The request a subgraph call is made for (absent for Hive's own fetches). */
export interface FetchContext {
  request?: { headers: { get(name: string): string | null } };
}
interface OnFetchPayload {
  url: string;
  options: FetchOptions;
  setOptions: (options: FetchOptions) => void;
  context?: FetchContext;
}

/** A plugin that signs each subgraph call as the principal `principalOf` names for its request. */
export function signSubgraphCalls(principalOf: (context: FetchContext | undefined) => Principal) {
  return {
    onFetch({ url, options, setOptions, context }: OnFetchPayload): void {
      const subgraph = subgraphOf.get(url);
      // Not a subgraph call (none is expected here): sent as it is.
      if (!subgraph) return;
      const { body = '' } = options;
      if (typeof body !== 'string') throw new Error(`cannot sign a call to subgraph ${subgraph} whose body is not text`);
      const { pathname, search } = new URL(url);
      const principal = signer.sign(principalOf(context), {
        subgraph,
        method: options.method ?? 'GET',
        path: `${pathname}${search}`,
        body,
        idempotencyKey: options.headers?.['idempotency-key'],
      });
      setOptions({ ...options, headers: { ...options.headers, [PRINCIPAL_HEADER]: principal } });
    },
  };
}

export const gatewayConfig = {
  plugins: () => [signSubgraphCalls(() => DEMO_PRINCIPAL)],
  ...(env['HIVE_DEDUPLICATE_INFLIGHT_REQUESTS'] === 'false' ? { transportEntries: { '*.http': { options: { deduplicateInflightRequests: false } } } } : {}),
};
