import type { Storage } from '@graphiql/toolkit';

/*
 * What GraphiQL keeps between visits (tabs, history, the open panel), without the headers: GraphiQL's history
 * stores each query's headers with it, and the headers hold the credential. Every value written passes through
 * here first; a `headers` entry at any depth is written as null, and a value that is the headers alone is not
 * written at all. The credential stays in the page's memory and is gone when the tab is closed.
 */

/** `value` with every `headers` property emptied, at any depth. */
function withoutHeaders(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutHeaders);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, key === 'headers' ? null : withoutHeaders(inner)]));
}

/** Whether a stored value may carry a credential (any key that names headers, or a JSON value holding them). */
function scrubbed(key: string, value: string): string | null {
  if (/headers$/i.test(key)) return null;
  if (!value.includes('headers')) return value;
  try {
    return JSON.stringify(withoutHeaders(JSON.parse(value)));
  } catch {
    // Not JSON, yet it names headers: kept out rather than risk a credential in storage.
    return null;
  }
}

/** The keys GraphiQL writes (`graphiql:` first). */
function ownKeys(backing: globalThis.Storage): string[] {
  const keys: string[] = [];
  for (let i = 0; i < backing.length; i++) {
    const key = backing.key(i);
    if (key?.startsWith('graphiql:')) keys.push(key);
  }
  return keys;
}

/** GraphiQL's storage over `backing` (the browser's localStorage), headers kept out of it. */
export function storageWithoutCredentials(backing: globalThis.Storage): Storage {
  return {
    getItem: (key) => backing.getItem(key),
    setItem: (key, value) => {
      const kept = scrubbed(key, value);
      if (kept === null) backing.removeItem(key);
      else backing.setItem(key, kept);
    },
    removeItem: (key) => backing.removeItem(key),
    // GraphiQL's keys only: the origin's other storage (the dashboard's) is not the explorer's to clear.
    clear: () => {
      for (const key of ownKeys(backing)) backing.removeItem(key);
    },
    get length() {
      return ownKeys(backing).length;
    },
  };
}
