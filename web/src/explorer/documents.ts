import { createElement as h, useEffect, useState, type ReactElement } from 'react';
import { useGraphiQL, type GraphiQLPlugin } from '@graphiql/react';
import { credentialOf } from './fetcher.js';

/*
 * The Documents tab: the registered documents of the clients the caller may act as (GET /graphql/documents,
 * asked with the credential in the headers editor), each loaded into the editor with a click. Under a
 * safelist these are what a principal without `schema:free-text` can run.
 */

interface Listed {
  mode: 'off' | 'allow' | 'safelist';
  freeText: boolean;
  documents: { client: string; id: string; name: string | null; type: string; text: string }[];
}

type State = { kind: 'loading' } | { kind: 'listed'; listed: Listed } | { kind: 'failed'; message: string };

/** The headers editor's text as headers; none when it does not hold a JSON object. */
function headersOf(text: string | undefined): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text?.trim() || '{}');
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function DocumentsContent({ url }: { url: string }): ReactElement {
  const headerEditor = useGraphiQL((state) => state.headerEditor);
  const queryEditor = useGraphiQL((state) => state.queryEditor);
  const [state, setState] = useState<State>({ kind: 'loading' });
  const [asked, setAsked] = useState(0);
  useEffect(() => {
    let current = true;
    const credential = credentialOf(headersOf(headerEditor?.getValue()));
    fetch(url, { headers: credential })
      .then(async (res) => {
        if (!current) return;
        if (!res.ok) {
          const body = (await res.json().catch(() => null)) as { detail?: string; title?: string } | null;
          setState({ kind: 'failed', message: `${res.status}: ${body?.detail ?? body?.title ?? res.statusText}` });
          return;
        }
        setState({ kind: 'listed', listed: (await res.json()) as Listed });
      })
      .catch((error: unknown) => current && setState({ kind: 'failed', message: String(error) }));
    return () => {
      current = false;
    };
  }, [url, headerEditor, asked]);

  const load = (text: string) => queryEditor?.setValue(text);
  const refresh = h('button', { type: 'button', className: 'graphiql-button', onClick: () => setAsked((n) => n + 1) }, 'Refresh (after changing the headers)');
  if (state.kind === 'loading') return h('div', { className: 'explorer-documents' }, 'Loading…');
  if (state.kind === 'failed') return h('div', { className: 'explorer-documents' }, h('p', null, `Could not list documents: ${state.message}`), refresh);
  const { listed } = state;
  const own = listed.documents.filter((d) => d.client !== 'rest');
  const note =
    listed.mode === 'safelist' && !listed.freeText
      ? 'A safelist is on: this credential may run only these documents.'
      : listed.mode === 'off'
        ? 'Trusted documents are off: any operation text runs.'
        : 'This credential may also run text of its own.';
  return h(
    'div',
    { className: 'explorer-documents' },
    h('p', null, note),
    own.length === 0
      ? h('p', null, 'No registered documents for the clients this credential may act as.')
      : h(
          'ul',
          null,
          own.map((d) =>
            h(
              'li',
              { key: `${d.client}/${d.id}` },
              h(
                'button',
                { type: 'button', className: 'graphiql-button', title: d.text, onClick: () => load(d.text) },
                `${d.name ?? d.id}`,
                h('span', { className: 'graphiql-doc-explorer-argument-multiple' }, ` ${d.client} · ${d.type}`),
              ),
            ),
          ),
        ),
    refresh,
  );
}

function DocumentsIcon(): ReactElement {
  return h(
    'svg',
    { viewBox: '0 0 24 24', width: 20, height: 20, 'aria-hidden': true, fill: 'none', stroke: 'currentColor', strokeWidth: 1.5 },
    h('path', { d: 'M7 3h7l5 5v13H7z M14 3v5h5 M10 13h6 M10 17h6' }),
  );
}

/** The Documents plugin, asking `url` (the gateway's /graphql/documents). */
export function documentsPlugin(url: string): GraphiQLPlugin {
  return { title: 'Trusted documents', icon: DocumentsIcon, content: () => h(DocumentsContent, { url }) };
}
