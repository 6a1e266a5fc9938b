import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GraphQLError, Kind, parse, validate, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import { z } from 'zod';
import { MAX_ERRORS } from '../pipeline/graphql-errors.js';

/*
 * Trusted documents as clients register them: manifests in Apollo's format (written by
 * `@apollo/generate-persisted-query-manifest`) or Relay's (`{ "<id>": "<text>" }`), one per client, and who
 * may act as each client. Every operation is parsed and validated against the served schema when it is
 * loaded: a manifest that does not parse, or holds an operation that is not valid, is refused whole,
 * naming its file and operation, and what was served before stays.
 */

type OperationType = 'query' | 'mutation' | 'subscription';

/** One registered operation. */
export interface TrustedDocument {
  client: string;
  id: string;
  body: string;
  /** The operation's name (Apollo manifests, named Relay operations); null for an anonymous one. */
  name: string | null;
  type: OperationType;
  /** The body parsed once, at load. */
  document: DocumentNode;
}

/** Who may act as a client: principals as `tenant/id`, `tenant/*`, or `*` (every authenticated principal). */
export interface ClientEntry {
  principals: readonly string[];
}

export interface DocumentSet {
  /** Documents by client, then by id. */
  clients: ReadonlyMap<string, ReadonlyMap<string, TrustedDocument>>;
  access: ReadonlyMap<string, ClientEntry>;
}

export class ManifestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ManifestError';
  }
}

const CLIENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const ID = z.string().min(1).max(256);

const apolloManifest = z.object({
  format: z.literal('apollo-persisted-query-manifest'),
  version: z.number().int().optional(),
  operations: z
    .array(
      z.object({
        id: ID,
        body: z.string().min(1),
        name: z.string().min(1).max(256).optional(),
        type: z.enum(['query', 'mutation', 'subscription']).optional(),
      }),
    )
    .max(100_000),
});
const relayManifest = z.record(ID, z.string().min(1));
const principalPattern = z.string().regex(/^(\*|[^/\s]+\/(\*|[^/\s]+))$/, 'a principal is `tenant/id`, `tenant/*` or `*`');
const clientsFile = z.record(
  z.string().regex(CLIENT_NAME, 'a client name is letters, digits, `.`, `_` and `-`'),
  z.object({ principals: z.array(principalPattern).min(1) }).strict(),
);

/** The SHA-256 of a document's text, as APQ and Apollo's manifests name documents. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The operations of one manifest (Apollo's format or Relay's), each checked against `schema`; `source` names
 * the file (or the request) in every error.
 */
export function parseManifest(client: string, raw: unknown, schema: GraphQLSchema, source: string): Map<string, TrustedDocument> {
  if (!CLIENT_NAME.test(client)) throw new ManifestError(`${source}: "${client}" is not a client name (letters, digits, ".", "_" and "-", at most 100)`);
  const entries: Array<{ id: string; body: string; name?: string | undefined; type?: OperationType | undefined }> = [];
  if (typeof raw === 'object' && raw !== null && 'format' in raw) {
    const parsed = apolloManifest.safeParse(raw);
    if (!parsed.success) throw new ManifestError(`${source}: not an Apollo persisted-query manifest: ${describeIssues(parsed.error)}`);
    entries.push(...parsed.data.operations);
  } else {
    const parsed = relayManifest.safeParse(raw);
    if (!parsed.success)
      throw new ManifestError(`${source}: neither an Apollo persisted-query manifest nor a Relay one ({ "<id>": "<text>" }): ${describeIssues(parsed.error)}`);
    for (const [id, body] of Object.entries(parsed.data)) entries.push({ id, body });
  }
  const documents = new Map<string, TrustedDocument>();
  for (const entry of entries) {
    const label = `${source}: operation ${entry.name ? `${entry.name} (id ${entry.id})` : `id ${entry.id}`}`;
    if (documents.has(entry.id)) throw new ManifestError(`${label}: the id appears twice`);
    const operation = checkedOperation(entry.body, schema, label);
    const name = operation.definition.name?.value ?? null;
    if (entry.name !== undefined && entry.name !== name)
      throw new ManifestError(`${label}: the manifest names it ${entry.name}, its text ${name ?? 'nothing'}`);
    if (entry.type !== undefined && entry.type !== (operation.definition.operation as OperationType)) {
      throw new ManifestError(`${label}: the manifest says ${entry.type}, its text is a ${operation.definition.operation}`);
    }
    documents.set(entry.id, {
      client,
      id: entry.id,
      body: entry.body,
      name,
      type: operation.definition.operation,
      document: operation.document,
    });
  }
  return documents;
}

/** Who may act as each client, from `clients.json`'s text. */
function parseClients(raw: unknown, source: string): Map<string, ClientEntry> {
  const parsed = clientsFile.safeParse(raw);
  if (!parsed.success) throw new ManifestError(`${source}: ${describeIssues(parsed.error)}`);
  return new Map(Object.entries(parsed.data));
}

/**
 * Every manifest in `dir` (`<client>.json`) and `clients.json`, checked whole: a client's manifest without an
 * entry in clients.json is refused (nobody could use it, or anybody could), as is a file that does not parse.
 */
export function readDocumentFolder(dir: string, schema: GraphQLSchema): DocumentSet {
  const names = readdirSync(dir).filter((f) => f.endsWith('.json'));
  if (!names.includes('clients.json')) throw new ManifestError(`${join(dir, 'clients.json')}: missing; it names the principals that may act as each client`);
  const access = parseClients(readJson(join(dir, 'clients.json')), join(dir, 'clients.json'));
  const clients = new Map<string, ReadonlyMap<string, TrustedDocument>>();
  for (const file of names.filter((f) => f !== 'clients.json').sort()) {
    const client = file.slice(0, -'.json'.length);
    const path = join(dir, file);
    if (!access.has(client)) throw new ManifestError(`${path}: client ${client} has no entry in clients.json naming the principals that may act as it`);
    clients.set(client, parseManifest(client, readJson(path), schema, path));
  }
  return { clients, access };
}

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ManifestError(`${path}: not JSON (${(error as Error).message})`);
  }
}

/** The text parsed and validated against the schema, with its one operation. */
function checkedOperation(body: string, schema: GraphQLSchema, label: string): { document: DocumentNode; definition: OperationDefinitionNode } {
  let document: DocumentNode;
  try {
    document = parse(body, { noLocation: true });
  } catch (error) {
    throw new ManifestError(`${label}: does not parse: ${error instanceof GraphQLError ? error.message : String(error)}`);
  }
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operations.length !== 1) throw new ManifestError(`${label}: holds ${operations.length} operations; a registered document holds exactly one`);
  const invalid = validate(schema, document, undefined, { maxErrors: MAX_ERRORS });
  if (invalid.length > 0) throw new ManifestError(`${label}: not valid against the served schema: ${invalid.map((e) => e.message).join('; ')}`);
  const definition = operations[0]!;
  return { document, definition };
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(top)'}: ${i.message}`)
    .join('; ');
}
