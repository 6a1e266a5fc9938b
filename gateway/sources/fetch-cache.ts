import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { OperationTypeNode, BREAK, Kind, parse, visit, type SelectionSetNode } from 'graphql';
import type { PureReads } from '../../platform/subgraph.js';
import type { GatewayContext } from '../pipeline/context.js';
import { jsonKey } from '../pipeline/json-key.js';

/*
 * Subgraph answers that are functions of the request alone are kept and served again. A subgraph declares
 * which reads are (`SubgraphModule.pure`: a prediction from its inputs and the models it loaded, a path
 * recommendation from the paths it is given); a fetch qualifies when every root field it selects is one of
 * them, or it resolves `_entities` only on declared entity types. Such an answer depends on no state and no
 * clock, so nothing invalidates it; what bounds it is memory (least recently used answers go first) and an
 * age limit, which is how long a subgraph redeployed with other models can still be answered by the old
 * ones. An answer past its age is dropped as soon as a later read or write comes, not when memory runs out,
 * so what the cache holds is what the last `maxAgeMs` asked for, up to the bound (a server whose callers ask
 * ever new questions does not fill the bound with answers it can no longer serve). Answers with errors are
 * never kept. Every caller gets its own parsed copy, since the gateway merges entities into its result tree
 * in place.
 */

export interface FetchCacheOptions {
  /** Bytes of answers (JSON text) and keys kept over all subgraphs. */
  maxBytes: number;
  /** An answer older than this is fetched again. */
  maxAgeMs: number;
  now?: () => number;
}

export interface FetchCacheStats {
  hits: number;
  misses: number;
  entries: number;
  bytes: number;
}

interface Entry {
  text: string;
  bytes: number;
  storedAt: number;
}

const MAX_CLASSIFIED_DOCUMENTS = 1000;

/** One store shared by the data sources of every subgraph, so one memory bound holds for all of them. */
export class FetchCache {
  /** In order of use, least recently used first: what the memory bound drops. */
  private readonly entries = new Map<string, Entry>();
  /** The same entries in the order they were stored, oldest first: what the age limit drops. */
  private readonly byAge = new Map<string, Entry>();
  private bytes = 0;
  private readonly now: () => number;
  readonly stats = { hits: new Map<string, number>(), misses: new Map<string, number>() };

  constructor(private readonly options: FetchCacheOptions) {
    this.now = options.now ?? Date.now;
  }

  snapshot(): FetchCacheStats {
    const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    return { hits: sum(this.stats.hits), misses: sum(this.stats.misses), entries: this.entries.size, bytes: this.bytes };
  }

  /** `source` with the pure reads of `subgraph` kept; everything else passes straight through. */
  wrap(subgraph: string, pure: PureReads | undefined, source: GraphQLDataSource<GatewayContext>): GraphQLDataSource<GatewayContext> {
    if (!pure || this.options.maxBytes <= 0) return source;
    const isPure = pureClassifier(pure);
    const count = (m: Map<string, number>) => m.set(subgraph, (m.get(subgraph) ?? 0) + 1);
    return {
      process: async (options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> => {
        const query = options.request.query ?? '';
        // Health checks carry no incoming request; they must reach the subgraph.
        if (!('incomingRequestContext' in options) || !isPure(query)) return source.process(options);
        const given = jsonKey(options.request.variables);
        if (given === null) return source.process(options);
        const key = `${subgraph}\u0000${options.request.operationName ?? ''}\u0000${query}\u0000${given}`;
        const kept = this.read(key);
        if (kept !== undefined) {
          count(this.stats.hits);
          return JSON.parse(kept) as GatewayGraphQLResponse;
        }
        count(this.stats.misses);
        const response = await source.process(options);
        if (response.data && !(response.errors && response.errors.length > 0)) {
          // Stored before the caller can change the tree; the HTTP envelope is not part of the answer.
          this.write(key, JSON.stringify({ data: response.data }));
        }
        return response;
      },
    };
  }

  private read(key: string): string | undefined {
    this.dropExpired();
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    // Most recently used last: the memory bound takes from the front.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.text;
  }

  private write(key: string, text: string): void {
    this.dropExpired();
    // Two bytes per UTF-16 unit is what the strings cost in memory.
    const bytes = 2 * (key.length + text.length);
    if (bytes > this.options.maxBytes / 16) return;
    const old = this.entries.get(key);
    if (old) this.drop(key, old);
    const entry = { text, bytes, storedAt: this.now() };
    this.entries.set(key, entry);
    this.byAge.set(key, entry);
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.options.maxBytes) break;
      this.drop(oldest, entry);
    }
  }

  /** Drops answers past their age, oldest first; when none is, this looks at one entry. */
  private dropExpired(): void {
    const limit = this.now() - this.options.maxAgeMs;
    for (const [key, entry] of this.byAge) {
      if (entry.storedAt >= limit) break;
      this.drop(key, entry);
    }
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.byAge.delete(key);
    this.bytes -= entry.bytes;
  }
}

/**
 * Whether a subgraph document reads only what `pure` declares: a query whose root fields are declared
 * (`__typename` always qualifies), or `_entities` with fragments on declared entity types only, and no
 * field named in `except` anywhere.
 * Documents are classified once (the gateway sends the same few plan-step documents again and again).
 */
export function pureClassifier(pure: PureReads): (query: string) => boolean {
  const known = new Map<string, boolean>();
  const rootField = (name: string) => name === '__typename' || pure.query === 'all' || pure.query.includes(name);
  const entitiesOnly = (set: SelectionSetNode | undefined) =>
    set !== undefined &&
    set.selections.every(
      (s) =>
        (s.kind === Kind.FIELD && s.name.value === '__typename') ||
        (s.kind === Kind.INLINE_FRAGMENT && s.typeCondition !== undefined && pure.entities.includes(s.typeCondition.name.value)),
    );
  const classify = (query: string): boolean => {
    let document;
    try {
      document = parse(query, { noLocation: true });
    } catch {
      return false;
    }
    if (document.definitions.length !== 1) return false;
    const [operation] = document.definitions;
    if (operation?.kind !== Kind.OPERATION_DEFINITION || operation.operation !== OperationTypeNode.QUERY) return false;
    const declared = operation.selectionSet.selections.every((s) => {
      if (s.kind !== Kind.FIELD) return false;
      if (s.name.value === '_entities') return entitiesOnly(s.selectionSet);
      return rootField(s.name.value);
    });
    const except = pure.except ?? [];
    if (!declared || except.length === 0) return declared;
    let excepted = false;
    visit(operation, {
      Field(field) {
        if (!except.includes(field.name.value)) return undefined;
        excepted = true;
        return BREAK;
      },
    });
    return !excepted;
  };
  return (query) => {
    let verdict = known.get(query);
    if (verdict === undefined) {
      verdict = classify(query);
      if (known.size >= MAX_CLASSIFIED_DOCUMENTS) known.delete(known.keys().next().value!);
      known.set(query, verdict);
    }
    return verdict;
  };
}
