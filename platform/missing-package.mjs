// @ts-check
/*
 * A package the server needs that is not installed (node_modules missing, cut short, or from another
 * checkout) ends `npm start` and `npm run subgraph` with what to do, never with the loader's stack trace:
 * tools/start.mjs for what the server's first modules import, gateway/http/process.ts for what loads later.
 */

/**
 * The name of the package whose absence `error` reports (Node's ERR_MODULE_NOT_FOUND for a bare specifier,
 * or CommonJS's MODULE_NOT_FOUND), or null for anything else (a missing file of the project is not a
 * missing package).
 * @param {unknown} error
 * @returns {string | null}
 */
export function missingPackage(error) {
  if (typeof error !== 'object' || error === null) return null;
  const { code, message } = /** @type {{ code?: unknown; message?: unknown }} */ (error);
  if (typeof message !== 'string') return null;
  if (code === 'ERR_MODULE_NOT_FOUND') return /^Cannot find package '([^']+)'/.exec(message)?.[1] ?? null;
  if (code === 'MODULE_NOT_FOUND') {
    const name = /^Cannot find module '([^']+)'/.exec(message)?.[1];
    return name && !name.startsWith('.') && !name.startsWith('/') ? name : null;
  }
  return null;
}

/**
 * What to tell the operator about a missing package.
 * @param {string} name
 */
export function missingPackageMessage(name) {
  return `the package '${name}' is not installed (node_modules is missing or incomplete): run \`npm ci\` in the project's directory, with network or npm's cache`;
}
