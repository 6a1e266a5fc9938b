import { randomUUID } from 'node:crypto';
import { execute, parse, type DocumentNode, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { PRINCIPAL_HEADER, SYSTEM_PRINCIPAL, type Principal, type PrincipalSigner } from './principal.js';
import type { SubgraphTrust } from './subgraph-trust.js';

/**
 * How one subgraph asks another for an answer (rental asks prediction for the travel forecast of a truck
 * run). It speaks the peer's public GraphQL schema, never its code: in this process when the peer runs
 * here, over HTTP when SUBGRAPH_URLS names it. A peer that runs nowhere this process can reach, fails, or
 * does not answer within PEER_TIMEOUT_MS raises `PeerUnavailable`; the caller decides its fallback.
 */
export interface Peers {
  query<T>(peer: string, document: string, variables: Record<string, unknown>): Promise<T>;
}

export class PeerUnavailable extends Error {
  constructor(
    readonly peer: string,
    reason: string,
  ) {
    super(`subgraph ${peer} cannot answer: ${reason}`);
    this.name = 'PeerUnavailable';
  }
}

/** What a peer running in this process offers a caller: its schema and a context for a request. */
interface LocalPeer {
  schema: GraphQLSchema;
  context(request: { headers: Readonly<Record<string, string | undefined>>; principal: Principal }): unknown;
}

export interface PeerOptions {
  /** The subgraphs of this process, read at call time (a subgraph may start before its peers). */
  local: () => ReadonlyMap<string, LocalPeer>;
  /** Peers served by other processes: name -> GraphQL URL. */
  urls: Readonly<Record<string, string>>;
  /** Signs the system's principal for remote peers (their servers check it as the gateway's): the only credential sent. */
  signer: PrincipalSigner | null;
  /** Which remote peers refuse unsigned calls: no other is asked. */
  trust: SubgraphTrust;
  timeoutMs: number;
  /**
   * After a failure, the peer counts as away for this long: calls fail at once instead of each waiting
   * for a timeout. @default 1000
   */
  backoffMs?: number;
  now?: () => number;
}

export function createPeers(options: PeerOptions): Peers {
  const documents = new Map<string, DocumentNode>();
  const awayUntil = new Map<string, number>();
  const now = options.now ?? Date.now;
  const backoffMs = options.backoffMs ?? 1000;

  const parsed = (document: string) => {
    let doc = documents.get(document);
    if (!doc) documents.set(document, (doc = parse(document)));
    return doc;
  };

  const local = async (instance: LocalPeer, document: string, variables: Record<string, unknown>) =>
    await execute({
      schema: instance.schema,
      document: parsed(document),
      variableValues: variables,
      contextValue: instance.context({ headers: {}, principal: SYSTEM_PRINCIPAL }),
    });

  const remote = async (peer: string, url: string, document: string, variables: Record<string, unknown>): Promise<ExecutionResult> => {
    const signer = options.signer;
    if (!signer) throw new Error('calls to it cannot be signed without PRINCIPAL_SECRET');
    await options.trust.routable(peer);
    const requestId = randomUUID();
    const sent = JSON.stringify({ query: document, variables });
    const target = new URL(url);
    const call = { subgraph: peer, method: 'POST', path: `${target.pathname}${target.search}`, body: sent };
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'x-request-id': requestId,
        [PRINCIPAL_HEADER]: signer.sign(SYSTEM_PRINCIPAL, call),
      },
      body: sent,
      // The signed header goes to the peer's own URL only, never on to where a redirect points.
      redirect: 'error',
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const body = (await response.json()) as ExecutionResult;
    if (!response.ok && !body.errors) throw new Error(`HTTP ${response.status}`);
    return body;
  };

  return {
    async query<T>(peer: string, document: string, variables: Record<string, unknown>): Promise<T> {
      if ((awayUntil.get(peer) ?? 0) > now()) throw new PeerUnavailable(peer, 'it failed moments ago');
      const instance = options.local().get(peer);
      const url = options.urls[peer];
      if (!instance && !url) throw new PeerUnavailable(peer, 'it runs neither in this process nor in SUBGRAPH_URLS');
      let result: ExecutionResult;
      try {
        result = instance ? await local(instance, document, variables) : await remote(peer, url!, document, variables);
        if (result.errors?.length || !result.data) throw new Error(result.errors?.map((e) => e.message).join('; ') ?? 'no data');
      } catch (error) {
        awayUntil.set(peer, now() + backoffMs);
        throw new PeerUnavailable(peer, error instanceof Error ? error.message : String(error));
      }
      awayUntil.delete(peer);
      return result.data as T;
    },
  };
}
