import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import { ConfigError, isDemoMode, platformConfig, sectionOf, type PlatformConfig } from '../../platform/config.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ErrorCode } from '../../platform/errors.js';
import { refusalOf, type DocumentStep } from '../pipeline/pipeline.js';
import { REST_CLIENT } from '../rest/engine.js';
import { hasScope, isOperator, type Principal } from '../../platform/principal.js';
import { graphqlConfig, type GraphQLConfig, type TrustedDocumentMode } from './config.js';
import { ManifestError, parseManifest, readDocumentFolder, sha256Hex, type ClientEntry, type DocumentSet, type TrustedDocument } from './manifests.js';

/*
 * What a request on /graphql names as its operation, resolved to text before anything else looks at it:
 * free text; an automatic persisted query (APQ: `extensions.persistedQuery.sha256Hash`, its text sent once and
 * kept here); or a trusted document registered by its client (`extensions.persistedQuery`, `documentId`,
 * `doc_id`). The mode (`TRUSTED_DOCUMENTS`) says whether registered documents resolve (`allow`) and whether
 * they are all a principal without `schema:free-text` may run (`safelist`).
 *
 * The APQ store is per process, bounded by bytes: an entry is a hash and the text it names, so processes
 * cannot disagree, and a miss costs the client one round trip (it sends the text once more). A store shared
 * through the database would put a network read in front of every hashed request to save that round trip
 * once per process and document.
 */

/** What a request body or GET query may carry to name its operation. */
export interface DocumentParams {
  query?: unknown;
  extensions?: unknown;
  documentId?: unknown;
  doc_id?: unknown;
}

export type Resolution =
  | {
      ok: true;
      query: string;
      /** The registered document the request named or whose text it sent; null for free text. */
      registered: TrustedDocument | null;
      /** The request named its document by a hash or an id (a GET of it is cacheable). */
      byId: boolean;
    }
  | { ok: false; status: number; code: ErrorCode; message: string };

const HASH = /^[0-9a-fA-F]{64}$/;
const MAX_ID = 256;

export interface DocumentRegistryOptions {
  mode: TrustedDocumentMode;
  /** Bytes of APQ text kept; 0 turns APQ off. */
  apqBytes: number;
  registry: Registry;
}

export class DocumentRegistry {
  private set: DocumentSet = { clients: new Map(), access: new Map() };
  /** Every registered document by its exact text, for a safelisted principal that sends the text. */
  private byBody = new Map<string, TrustedDocument[]>();
  private readonly apq = new Map<string, string>();
  private apqHeld = 0;
  private readonly used: Counter<'client' | 'operation'>;
  private readonly apqOutcomes: Counter<'outcome'>;

  constructor(private readonly options: DocumentRegistryOptions) {
    const registers = [options.registry];
    this.used = new Counter({
      name: 'graphql_trusted_document_requests_total',
      help: 'Requests that ran a registered document, by client and operation (name, or id when anonymous)',
      labelNames: ['client', 'operation'],
      registers,
    });
    this.apqOutcomes = new Counter({
      name: 'graphql_persisted_query_requests_total',
      help: 'Automatic persisted queries: hit (the hash resolved), miss (PERSISTED_QUERY_NOT_FOUND), registered (text and hash sent)',
      labelNames: ['outcome'],
      registers,
    });
    const apq = this.apq;
    const held = () => this.apqHeld;
    new Gauge({
      name: 'graphql_persisted_query_store_bytes',
      help: 'Bytes of APQ text held by this process',
      registers,
      collect() {
        this.set(held());
      },
    });
    new Gauge({
      name: 'graphql_persisted_query_store_entries',
      help: 'APQ entries held by this process',
      registers,
      collect() {
        this.set(apq.size);
      },
    });
  }

  get mode(): TrustedDocumentMode {
    return this.options.mode;
  }

  /** Clients with registered documents (REST's own among them). */
  get clientCount(): number {
    return this.set.clients.size;
  }

  /** Replaces every client read from a folder (REST's documents and those registered since are kept). */
  loadFolder(dir: string, schema: GraphQLSchema): void {
    const read = readDocumentFolder(dir, schema);
    const clients = new Map(read.clients);
    const access = new Map(read.access);
    const rest = this.set.clients.get(REST_CLIENT);
    if (rest) {
      clients.set(REST_CLIENT, rest);
      access.set(REST_CLIENT, { principals: ['*'] });
    }
    this.swap({ clients, access });
  }

  /** Registers (or replaces) one client's manifest; checked whole against `schema` before anything changes. */
  register(client: string, manifest: unknown, access: ClientEntry, schema: GraphQLSchema, source: string): number {
    const documents = parseManifest(client, manifest, schema, source);
    const clients = new Map(this.set.clients).set(client, documents);
    this.swap({ clients, access: new Map(this.set.access).set(client, access) });
    return documents.size;
  }

  /** The REST routes' operations, registered under their own client so a safelist never breaks partners. */
  registerRest(operations: ReadonlyArray<{ operation: string }>, schema: GraphQLSchema): void {
    const byId = new Map(operations.map(({ operation }) => [sha256Hex(operation), operation] as const));
    const manifest = { format: 'apollo-persisted-query-manifest', operations: [...byId].map(([id, body]) => ({ id, body })) };
    this.register(REST_CLIENT, manifest, { principals: ['*'] }, schema, 'REST routes');
  }

  /** Resolves what a request names to the text it runs, or the error it answers; changes nothing but the APQ store. */
  resolve(params: DocumentParams, principal: Principal, clientName: string | undefined): Resolution {
    const named = namedId(params);
    if ('error' in named) return refused(400, 'BAD_REQUEST', named.error);
    const query = typeof params.query === 'string' && params.query !== '' ? params.query : undefined;
    const clients = this.clientsFor(principal, clientName);
    if ('error' in clients) return refused(403, 'FORBIDDEN', clients.error);

    if (named.id !== undefined && this.options.mode !== 'off') {
      const document = this.find(clients.names, named.id);
      if (document) {
        if (query !== undefined && query !== document.body)
          return refused(400, 'BAD_REQUEST', `Document ${named.id} is registered with another text than the query sent`);
        this.used.inc({ client: document.client, operation: document.name ?? document.id });
        return { ok: true, query: document.body, registered: document, byId: true };
      }
    }
    if (named.kind === 'documentId') {
      const where =
        this.options.mode === 'off' ? 'trusted documents are off (TRUSTED_DOCUMENTS=off)' : `no document with this id is registered for ${clients.label}`;
      return refused(400, 'PERSISTED_QUERY_NOT_FOUND', `Unknown document id ${named.id}: ${where}`);
    }
    if (named.kind === 'apq') {
      if (this.options.apqBytes === 0) return refused(200, 'PERSISTED_QUERY_NOT_SUPPORTED', 'PersistedQueryNotSupported');
      if (query === undefined) {
        const text = this.apqGet(named.id);
        if (text === undefined) {
          this.apqOutcomes.inc({ outcome: 'miss' });
          return refused(200, 'PERSISTED_QUERY_NOT_FOUND', 'PersistedQueryNotFound');
        }
        this.apqOutcomes.inc({ outcome: 'hit' });
        return this.freeText(text, principal, clients.names, true);
      }
      if (sha256Hex(query) !== named.id.toLowerCase()) return refused(400, 'BAD_REQUEST', 'provided sha does not match query');
      const resolved = this.freeText(query, principal, clients.names, true);
      // Text a safelisted principal may not run is not kept either: nothing changes for a refused request.
      if (resolved.ok) {
        this.apqPut(named.id.toLowerCase(), query);
        this.apqOutcomes.inc({ outcome: 'registered' });
      }
      return resolved;
    }
    if (query === undefined)
      return refused(400, 'BAD_REQUEST', 'GraphQL operations must contain a non-empty `query`, a `persistedQuery` extension, a `documentId` or a `doc_id`.');
    return this.freeText(query, principal, clients.names, false);
  }

  /**
   * Every registered document of the clients this principal may act as (REST's own among them), client by
   * client, whatever the mode (with trusted documents off they run as the text they hold).
   */
  documentsFor(principal: Principal): TrustedDocument[] {
    const clients = this.clientsFor(principal, undefined);
    if ('error' in clients) return [];
    return clients.names.flatMap((client) => [...(this.set.clients.get(client)?.values() ?? [])]);
  }

  /** Whether a principal may send operation text this registry does not hold (no safelist binds it). */
  takesFreeText(principal: Principal): boolean {
    return this.options.mode !== 'safelist' || isOperator(principal) || hasScope(principal, 'schema:free-text');
  }

  /** Text sent (or named by an APQ hash): runs unless a safelist refuses it for this principal. */
  private freeText(query: string, principal: Principal, clients: readonly string[], byId: boolean): Resolution {
    const registered = this.options.mode === 'off' ? undefined : this.byBody.get(query)?.find((d) => clients.includes(d.client));
    if (registered) {
      this.used.inc({ client: registered.client, operation: registered.name ?? registered.id });
      return { ok: true, query, registered, byId };
    }
    if (!this.takesFreeText(principal)) {
      return refused(
        403,
        'PERSISTED_QUERY_NOT_IN_LIST',
        `Principal ${principal.id} may run registered documents only (TRUSTED_DOCUMENTS=safelist): send a documentId registered for your client, or use a credential with schema:free-text`,
      );
    }
    return { ok: true, query, registered: null, byId };
  }

  /** The clients whose documents this principal may run: the one it names, or every one it may act as. */
  private clientsFor(principal: Principal, clientName: string | undefined): { names: string[]; label: string } | { error: string } {
    const allowed = (client: string) => {
      if (client === REST_CLIENT || isOperator(principal)) return true;
      const entry = this.set.access.get(client);
      return entry?.principals.some((p) => p === '*' || p === `${principal.tenant}/*` || p === `${principal.tenant}/${principal.id}`) ?? false;
    };
    if (clientName !== undefined && this.set.clients.has(clientName)) {
      if (!allowed(clientName)) return { error: `Principal ${principal.id} of tenant ${principal.tenant} may not act as client ${clientName}` };
      return { names: [clientName], label: `client ${clientName}` };
    }
    return { names: [...this.set.clients.keys()].filter(allowed), label: `the clients principal ${principal.id} may act as` };
  }

  private find(clients: readonly string[], id: string): TrustedDocument | undefined {
    for (const client of clients) {
      const found = this.set.clients.get(client)?.get(id);
      if (found) return found;
    }
    return undefined;
  }

  private swap(set: DocumentSet): void {
    const byBody = new Map<string, TrustedDocument[]>();
    for (const documents of set.clients.values()) for (const d of documents.values()) byBody.set(d.body, [...(byBody.get(d.body) ?? []), d]);
    this.set = set;
    this.byBody = byBody;
  }

  private apqGet(hash: string): string | undefined {
    const key = hash.toLowerCase();
    const text = this.apq.get(key);
    if (text === undefined) return undefined;
    // Least recently used first out: a hit moves to the back.
    this.apq.delete(key);
    this.apq.set(key, text);
    return text;
  }

  private apqPut(hash: string, text: string): void {
    const size = text.length * 2 + 128;
    if (size > this.options.apqBytes) return;
    const old = this.apq.get(hash);
    if (old !== undefined) {
      this.apq.delete(hash);
      this.apqHeld -= old.length * 2 + 128;
    }
    this.apq.set(hash, text);
    this.apqHeld += size;
    for (const [key, value] of this.apq) {
      if (this.apqHeld <= this.options.apqBytes) break;
      this.apq.delete(key);
      this.apqHeld -= value.length * 2 + 128;
    }
  }
}

/** The id a request names its document by, and how; an id of the wrong form is an error. */
function namedId(params: DocumentParams): { kind: 'none'; id?: undefined } | { kind: 'apq' | 'documentId'; id: string } | { error: string } {
  const ids: Array<{ kind: 'apq' | 'documentId'; id: string }> = [];
  const extensions = params.extensions;
  if (extensions !== undefined && extensions !== null) {
    if (typeof extensions !== 'object' || Array.isArray(extensions)) return { error: '`extensions` must be an object' };
    const persisted = (extensions as Record<string, unknown>)['persistedQuery'];
    if (persisted !== undefined) {
      if (typeof persisted !== 'object' || persisted === null)
        return { error: '`extensions.persistedQuery` must be an object with `version: 1` and `sha256Hash`' };
      const { version, sha256Hash } = persisted as Record<string, unknown>;
      if (version !== 1) return { error: 'Unsupported persisted query version: `extensions.persistedQuery.version` must be 1' };
      if (typeof sha256Hash !== 'string' || !HASH.test(sha256Hash)) return { error: '`extensions.persistedQuery.sha256Hash` must be 64 hexadecimal digits' };
      ids.push({ kind: 'apq', id: sha256Hash });
    }
  }
  for (const key of ['documentId', 'doc_id'] as const) {
    const value = params[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string' || value === '' || value.length > MAX_ID)
      return { error: `\`${key}\` must be a non-empty string of at most ${MAX_ID} characters` };
    ids.push({ kind: 'documentId', id: value });
  }
  if (ids.length === 0) return { kind: 'none' };
  if (new Set(ids.map((i) => i.id.toLowerCase())).size > 1)
    return { error: 'The request names more than one document (persistedQuery, documentId, doc_id disagree)' };
  return ids.find((i) => i.kind === 'documentId') ?? ids[0]!;
}

/**
 * The registry as the operation pipeline's document step (gateway/pipeline/pipeline.ts): a refusal keeps
 * its status (APQ's own answers are 200, as Apollo Server sends them).
 */
export function documentStep(registry: DocumentRegistry): DocumentStep {
  return {
    resolve(request) {
      const resolution = registry.resolve(request.params, request.principal, request.clientName);
      if (resolution.ok) return { ok: true, query: resolution.query, byId: resolution.byId };
      const refusal = refusalOf(new GraphQLError(resolution.message, { extensions: { code: resolution.code } }));
      return { ...refusal, status: resolution.status };
    },
  };
}

function refused(status: number, code: ErrorCode, message: string): Resolution {
  return { ok: false, status, code, message };
}

export interface DocumentsPluginOptions {
  config: PlatformConfig & GraphQLConfig;
  /** The subgraphs whose REST routes' operations are registered under their own client. */
  modules: readonly SubgraphModule[];
  /** The schema clients see now: registered documents are checked against it. */
  schema: () => GraphQLSchema;
}

/**
 * The `documents` part: persisted queries and trusted documents (`app.documents`): the REST routes'
 * operations under their own client, then the manifests of TRUSTED_DOCUMENTS_DIR. A manifest that does not
 * load stops the start; `app.reloadDocuments` reads the folder again (`SIGHUP`).
 */
export const documentsPlugin = fp(
  async (app: FastifyInstance, options: DocumentsPluginOptions) => {
    const config = { ...sectionOf(platformConfig, options.config, 'documents'), ...sectionOf(graphqlConfig, options.config, 'documents') };
    const mode = config.TRUSTED_DOCUMENTS ?? (isDemoMode(config) ? 'off' : 'allow');
    const documents = new DocumentRegistry({ mode, apqBytes: config.APQ_CACHE_MB * 1024 * 1024, registry: app.metrics.registry });
    documents.registerRest(
      options.modules.flatMap((m) => m.routes.map((r) => ({ operation: r.operation }))),
      options.schema(),
    );
    const dir = config.TRUSTED_DOCUMENTS_DIR;
    if (dir) {
      try {
        documents.loadFolder(dir, options.schema());
      } catch (error) {
        throw new ConfigError([`TRUSTED_DOCUMENTS_DIR: ${error instanceof ManifestError ? error.message : String(error)}`]);
      }
    }
    app.decorate('documents', documents);
    app.decorate('reloadDocuments', (): DocumentsReload => {
      if (!dir) return { ok: false, error: 'TRUSTED_DOCUMENTS_DIR is not set: there is no folder to read' };
      try {
        documents.loadFolder(dir, options.schema());
        return { ok: true, clients: documents.clientCount };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      }
    });
  },
  { name: 'documents', fastify: '5.x', dependencies: ['metrics'] },
);

export type DocumentsReload = { ok: true; clients: number } | { ok: false; error: string };

declare module 'fastify' {
  interface FastifyInstance {
    /** Persisted queries and trusted documents, by client. */
    documents: DocumentRegistry;
    /**
     * Reads TRUSTED_DOCUMENTS_DIR again (`SIGHUP`): every manifest checked before any is served; on a
     * failure the documents served before stay, and the error names the file and operation.
     */
    reloadDocuments(): DocumentsReload;
  }
}
