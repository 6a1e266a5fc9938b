/**
 * The API key the page sends in graphql-ws `connection_init` when the server has API_KEYS set. It is typed
 * into the page and kept in sessionStorage: it lasts as long as the tab, is never written to a cookie or
 * a URL, and is sent nowhere but the gateway's WebSocket.
 */
const KEY = 'ops-supergraph.api-key';
/** The key when sessionStorage is unavailable (a privacy mode): kept for this page's life only. */
let memory: string | null = null;

export function storedKey(): string | null {
  try {
    const key = sessionStorage.getItem(KEY);
    return key && key.length > 0 ? key : null;
  } catch {
    return memory;
  }
}

export function storeKey(key: string | null): void {
  memory = key;
  try {
    if (key) sessionStorage.setItem(KEY, key);
    else sessionStorage.removeItem(KEY);
  } catch {
    // Kept in memory only.
  }
}
