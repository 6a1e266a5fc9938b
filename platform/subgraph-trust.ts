/**
 * Whether a subgraph server may be routed to: it must refuse a call its gateway did not sign. Each server
 * is asked with one unsigned call (a POST of `{ __typename }` to its GraphQL URL, no credential, no
 * signature): 401 or 403 is a refusal (trusted); an answer means it would have acted for a call nobody
 * signed (untrusted: not routed to until it refuses); no answer (down, 5xx, no GraphQL there) is unknown
 * (not routed to: the call would fail anyway). A trusted verdict holds for `maxAgeMs` and is then asked
 * again in the background; any other is asked again before each use. One question per server at a time.
 */
/*
 * A check for mistakes (a subgraph server started without PRINCIPAL_SECRET, an older release, a wrong URL),
 * not a proof: a server that refuses this call and serves others unsigned is not found by it. What such a
 * server could gain is bounded anyway: the gateway sends it no credential, only a principal signed for one
 * call, once, for 30 s.
 */
export type TrustVerdict = 'refuses-unsigned' | 'accepts-unsigned' | 'unreachable';

export class UntrustedSubgraph extends Error {
  constructor(
    readonly subgraph: string,
    readonly verdict: Exclude<TrustVerdict, 'refuses-unsigned'>,
  ) {
    super(
      verdict === 'accepts-unsigned'
        ? `subgraph ${subgraph} answered a call nobody signed: not routed to until it refuses one (set PRINCIPAL_SECRET on its server)`
        : `subgraph ${subgraph} did not answer whether it refuses unsigned calls`,
    );
    this.name = 'UntrustedSubgraph';
  }
}

export interface SubgraphTrustOptions {
  /** How long a verdict holds before it is asked again. @default 30000 */
  maxAgeMs?: number;
  /** How long the unsigned call may take before the server counts as unreachable (as long as a call may). @default 2000 */
  timeoutMs?: number;
  /** Told of every verdict that differs from the one before (the first included). */
  onVerdict?: (subgraph: string, verdict: TrustVerdict) => void;
  now?: () => number;
}

interface Held {
  verdict: TrustVerdict;
  at: number;
}

export class SubgraphTrust {
  private readonly held = new Map<string, Held>();
  private readonly asking = new Map<string, Promise<TrustVerdict>>();
  private readonly maxAgeMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(
    private readonly urls: ReadonlyMap<string, string>,
    private readonly options: SubgraphTrustOptions = {},
  ) {
    this.maxAgeMs = options.maxAgeMs ?? 30_000;
    this.timeoutMs = options.timeoutMs ?? 2_000;
    this.now = options.now ?? Date.now;
  }

  /** Asks every server now (at start): resolves when all have answered or timed out. */
  async checkAll(): Promise<ReadonlyMap<string, TrustVerdict>> {
    const verdicts = await Promise.all([...this.urls.keys()].map(async (name) => [name, await this.ask(name)] as const));
    return new Map(verdicts);
  }

  /** The verdict last held for a subgraph (null: not asked yet). */
  verdictOf(subgraph: string): TrustVerdict | null {
    return this.held.get(subgraph)?.verdict ?? null;
  }

  /**
   * Whether a trusted verdict is held (stale ones too, asked again in the background): the check a call
   * makes first, with no promise when the answer is yes.
   */
  trusted(subgraph: string): boolean {
    const held = this.held.get(subgraph);
    if (held?.verdict !== 'refuses-unsigned') return false;
    if (this.now() - held.at >= this.maxAgeMs) void this.ask(subgraph);
    return true;
  }

  /**
   * The subgraph's verdict for a call now: a trusted one held for less than `maxAgeMs` at once (a stale
   * one too, while it is asked again in the background); any other is asked again first, so a server
   * that starts refusing unsigned calls is routed to from its next call.
   */
  async current(subgraph: string): Promise<TrustVerdict> {
    return this.trusted(subgraph) ? 'refuses-unsigned' : this.ask(subgraph);
  }

  /** Resolves when `subgraph` may be routed to (`current` is trusted); throws UntrustedSubgraph otherwise. */
  async routable(subgraph: string): Promise<void> {
    const verdict = await this.current(subgraph);
    if (verdict !== 'refuses-unsigned') throw new UntrustedSubgraph(subgraph, verdict);
  }

  /** Asks the server now (one question in flight per server), holding and returning its verdict. */
  ask(subgraph: string): Promise<TrustVerdict> {
    const inFlight = this.asking.get(subgraph);
    if (inFlight) return inFlight;
    const url = this.urls.get(subgraph);
    if (!url) return Promise.resolve('unreachable');
    const asked = unsignedCallVerdict(url, this.timeoutMs).then((verdict) => {
      const before = this.held.get(subgraph)?.verdict;
      this.held.set(subgraph, { verdict, at: this.now() });
      this.asking.delete(subgraph);
      if (verdict !== before) {
        try {
          this.options.onVerdict?.(subgraph, verdict);
        } catch {
          // Told, not asked: a listener's failure changes no verdict.
        }
      }
      return verdict;
    });
    this.asking.set(subgraph, asked);
    return asked;
  }
}

/** One unsigned call to a subgraph server, and what its answer says about it. */
async function unsignedCallVerdict(url: string, timeoutMs: number): Promise<TrustVerdict> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
      // A redirect is no answer from the subgraph server itself.
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status === 401 || res.status === 403) return 'refuses-unsigned';
    // An answer (data, or a GraphQL error about the request) means it read a call nobody signed.
    if (res.ok || res.status === 400) return 'accepts-unsigned';
    // Redirected (3xx), failing (5xx), or no GraphQL there (404): nothing said about signatures.
    return 'unreachable';
  } catch {
    return 'unreachable';
  }
}
