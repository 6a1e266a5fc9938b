import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { ANONYMOUS_PRINCIPAL, isScope, type Principal } from '../../platform/principal.js';
import { signSubgraphCalls, type FetchContext } from './hive.config.js';

/*
 * Hive Gateway's configuration in `npm run bench -- cache` (`--config-path`), with its response cache on:
 * answers to queries kept for 1 s (`ttl`, ms) in its default store (an LRU in each process's memory), keyed by
 * the operation, its variables and the request's session, and dropped when a mutation's answer names an
 * entity they hold (`invalidateViaMutation`: in the process that served the mutation). The session is the
 * principal of the request's API key (API_KEYS_FILE, the file the project's gateways are given), and each
 * subgraph call is signed as that principal (bench/peers/hive.config.ts's plugin), so tenant-scoped answers
 * differ per tenant as they do through the project's gateways. Hive deduplicates identical subgraph reads in
 * flight before the call is signed: the principal also travels in a header of its own (propagated from the
 * client's request), which makes two principals' reads differ there. Hive checks no key: an unknown one is
 * signed as the anonymous principal, whom the subgraph servers refuse every field but public ones.
 */

/** The header that keeps two principals' subgraph reads apart in Hive's deduplication. */
const SESSION_HEADER = 'x-bench-session';

interface KeyEntry {
  key: string;
  principal: string;
  tenant: string;
  scopes: string[];
}

const keysFile = env['API_KEYS_FILE'];
if (!keysFile) throw new Error('API_KEYS_FILE: the keys whose principals this gateway signs as (the benchmark sets it)');
const principals = new Map<string, Principal>(
  (JSON.parse(readFileSync(keysFile, 'utf8')) as KeyEntry[]).map((e) => [e.key, { id: e.principal, tenant: e.tenant, scopes: e.scopes.filter(isScope) }]),
);

const principalOf = (context: FetchContext | undefined): Principal => principals.get(context?.request?.headers.get('x-api-key') ?? '') ?? ANONYMOUS_PRINCIPAL;

/** A request's session: its principal, as `tenant/name`. */
function sessionOf(request: NonNullable<FetchContext['request']>): string {
  const principal = principalOf({ request });
  return `${principal.tenant}/${principal.id}`;
}

export const gatewayConfig = {
  plugins: () => [signSubgraphCalls(principalOf)],
  propagateHeaders: { fromClientToSubgraphs: ({ request }: { request: NonNullable<FetchContext['request']> }) => ({ [SESSION_HEADER]: sessionOf(request) }) },
  responseCaching: { ttl: 1000, invalidateViaMutation: true, session: sessionOf },
};
