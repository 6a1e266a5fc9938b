import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import './explorer.css';
import { GraphiQL, HISTORY_PLUGIN } from 'graphiql';
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { documentsPlugin } from './documents.js';
import { explorerFetcher, type Transport } from './fetcher.js';
import { storageWithoutCredentials } from './storage.js';

/*
 * The GraphQL explorer served at /graphiql: GraphiQL over this gateway, built into the dashboard's bundle
 * (nothing is loaded from another host). The schema and its docs come from introspection, which the gateway
 * answers to holders of `schema:read` (everyone in demo mode); the headers editor holds the credential.
 */

// Relative to the page (/graphiql), so the explorer works behind a proxy that mounts the gateway under a path.
const base = new URL('graphql', window.location.href);
const ws = new URL(base);
ws.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';

// What the page says above the editor: why there is no schema, and how subscriptions are carried.
const note = document.getElementById('explorer-note')!;
const notes: { schema: string | null; transport: string | null } = { schema: null, transport: null };
const showNotes = () => {
  const text = [notes.schema, notes.transport].filter((t): t is string => t !== null).join(' ');
  note.hidden = text === '';
  note.textContent = text;
};
const events = {
  onTransport(transport: Transport) {
    notes.transport = transport === 'sse' ? 'Subscriptions over Server-Sent Events: no WebSocket could be opened to this server.' : null;
    document.body.dataset['transport'] = transport;
    showNotes();
  },
  onSchema(refusal: string | null) {
    notes.schema =
      refusal === null
        ? null
        : `No schema or docs for this credential: ${refusal}. Operations still run; a credential holding schema:read (put in the Headers tab, then re-fetch the schema) shows them.`;
    document.body.dataset['schema'] = refusal === null ? 'loaded' : 'refused';
    showNotes();
  },
};

const DEFAULT_QUERY = `# Welcome to the ops-supergraph explorer.
# Put your credential in the Headers tab below, as {"x-api-key": "..."} or
# {"authorization": "Bearer ..."} (demo mode needs none). It stays in this page's memory.

query Fleet {
  fleetSummary {
    total
    available
    reserved
    inUse
    utilization
  }
}
`;

createRoot(document.getElementById('explorer')!).render(
  createElement(GraphiQL, {
    fetcher: explorerFetcher({ http: base.href, ws: ws.href }, events),
    plugins: [HISTORY_PLUGIN, documentsPlugin(new URL('graphql/documents', window.location.href).href)],
    defaultQuery: DEFAULT_QUERY,
    defaultHeaders: '{}',
    shouldPersistHeaders: false,
    storage: storageWithoutCredentials(window.localStorage),
    isHeadersEditorEnabled: true,
  }),
);
