import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A key of a keys file (API_KEYS_FILE), as operators write one. */
export interface KeyEntry {
  key: string;
  principal: string;
  tenant: string;
  scopes: readonly string[];
}

/** One client's registered documents: a Relay manifest (`{ id: text }`) or an Apollo one (operations with names). */
export interface ClientDocuments {
  client: string;
  /** Who may act as the client: `tenant/id`, `tenant/*` or `*`. */
  principals: readonly string[];
  /** By id: Relay's format. */
  documents?: Record<string, string>;
  /** Apollo's format (`apollo-persisted-query-manifest`). */
  operations?: ReadonlyArray<{ id: string; body: string; name: string }>;
}

/**
 * Writes a keys file and a trusted-documents folder under `dir` and returns the environment that serves them
 * under a safelist: the setup the suites of the doors share.
 */
export function safelistEnv(dir: string, keys: readonly KeyEntry[], clients: readonly ClientDocuments[]): Record<string, string> {
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify(keys));
  const documents = join(dir, 'documents');
  mkdirSync(documents, { recursive: true });
  for (const { client, documents: byId, operations } of clients) {
    const manifest = operations ? { format: 'apollo-persisted-query-manifest', version: 1, operations } : (byId ?? {});
    writeFileSync(join(documents, `${client}.json`), JSON.stringify(manifest));
  }
  writeFileSync(join(documents, 'clients.json'), JSON.stringify(Object.fromEntries(clients.map((c) => [c.client, { principals: c.principals }]))));
  return { API_KEYS_FILE: keysFile, TRUSTED_DOCUMENTS: 'safelist', TRUSTED_DOCUMENTS_DIR: documents };
}
