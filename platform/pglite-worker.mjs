// @ts-check
/*
 * The embedded database's thread (platform/db.ts, `openPglite`). PGlite is PostgreSQL compiled to
 * WebAssembly and runs wherever it is called: on the server's thread it would start (about 0.35 s of
 * WebAssembly on an idle core) and answer every statement there. Here it runs beside that thread, so the
 * start loads and builds the server while the database opens, and statements run beside resolvers.
 *
 * Plain JavaScript importing only plain JavaScript of the project's (the int8 rule, shared with the
 * PostgreSQL driver): the same file runs under the test runner (from the TypeScript tree) and from the
 * compiled server, which keeps its source files' URLs (tools/build.mjs).
 *
 * Messages in: `{ id, op, ... }` (query, exec, begin, end, listen, unlisten, close), each answered once
 * by `{ id, ok: true, value }` or `{ id, ok: false, error }`; NOTIFY payloads go out as `{ notify, payload }`.
 * A transaction is held open between `begin` and `end` (PGlite runs one at a time: every other statement
 * waits for it, as on one connection).
 */
import { Blob } from 'node:buffer';
import module from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { INT8_OID, parseInt8 } from './int8.mjs';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { dataDir, compileCache, wasmModule, fsBundle } =
  /** @type {{ dataDir?: string; compileCache?: string; wasmModule?: WebAssembly.Module; fsBundle?: SharedArrayBuffer }} */ (workerData);
// The compile cache is per thread: turned on before PGlite's modules load (imported below, not statically).
if (compileCache) /** @type {{ enableCompileCache?: (dir: string) => unknown }} */ (module).enableCompileCache?.(compileCache);
const { PGlite } = await import('@electric-sql/pglite');

/**
 * An error as it crosses to the server's thread: its class name, message and every field of plain value
 * (SQLSTATE `code`, `constraint`, `detail`, `routine`, ...), which is what the error classification reads.
 * @param {unknown} error
 */
function serialize(error) {
  // Besides Errors: Emscripten's ExitStatus (PostgreSQL exited), a thrown string.
  const thrown = typeof error === 'object' && error !== null ? /** @type {Record<string, unknown>} */ (error) : {};
  const name = error instanceof Error ? error.name : typeof thrown['name'] === 'string' ? thrown['name'] : 'Error';
  const message =
    error instanceof Error
      ? error.message
      : typeof thrown['message'] === 'string'
        ? thrown['message']
        : typeof error === 'string'
          ? error
          : (JSON.stringify(error) ?? String(error));
  /** @type {Record<string, string | number | boolean | null>} */
  const fields = {};
  for (const [key, value] of Object.entries(thrown)) {
    if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[key] = value;
  }
  return { name, message, fields };
}

/** @param {{ rows: unknown[]; affectedRows?: number }} res */
const result = (res) => ({ rows: res.rows, affectedRows: res.affectedRows ?? 0 });

/** @type {import('@electric-sql/pglite').PGlite} */
let db;
try {
  // Compiled and read once by the process when it opens more than one database (platform/pglite-thread.ts).
  const shared = wasmModule && fsBundle ? { pgliteWasmModule: wasmModule, fsBundle: new Blob([new Uint8Array(fsBundle)]) } : {};
  const options = { parsers: { [INT8_OID]: parseInt8 }, ...shared };
  db = dataDir ? new PGlite(dataDir, options) : new PGlite(options);
  await db.waitReady;
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ ready: false, error: serialize(error) });
  port.close();
  throw error;
}

/**
 * @typedef {object} OpenTransaction
 * @property {Promise<import('@electric-sql/pglite').Transaction>} opened PGlite's handle, once BEGIN ran
 * @property {(commit: boolean) => void} end resolves (COMMIT) or rejects (ROLLBACK) what PGlite waits on
 * @property {Promise<unknown>} done settles when PGlite has committed or rolled back
 */
/**
 * Open transactions by the id their caller gave in `begin`. The caller sends its statements without
 * waiting for `begin`'s answer (one round trip less per transaction): each waits here until BEGIN ran, and
 * fails as BEGIN did when it could not run.
 * @type {Map<number, OpenTransaction>}
 */
const transactions = new Map();
/** A rollback asked for: what the transaction's function "throws" so that PGlite rolls back. */
const ROLLBACK = Symbol('rollback');
/** Channels listened to, with the function that stops listening. @type {Map<string, Promise<() => Promise<void>>>} */
const channels = new Map();

/** Starts transaction `txId` (synchronously registered, so that statements sent after it find it). @param {number} txId */
function begin(txId) {
  if (transactions.has(txId)) throw new Error(`transaction ${txId} is already open`);
  /** @type {(tx: import('@electric-sql/pglite').Transaction) => void} */
  let began = () => undefined;
  /** @type {Promise<import('@electric-sql/pglite').Transaction>} */
  const began$ = new Promise((resolve) => (began = resolve));
  /** @type {(commit: boolean) => void} */
  let end = () => undefined;
  const ended = new Promise((resolve, reject) => (end = (commit) => (commit ? resolve(undefined) : reject(ROLLBACK))));
  const done = db.transaction(async (tx) => {
    began(tx);
    await ended;
  });
  // A transaction that cannot begin (a closed database) settles `done` first: its statements fail alike.
  const opened = Promise.race([began$, done.then(() => Promise.reject(new Error('the transaction ended before it began')))]);
  // One that did not begin gets no `end`: it is forgotten here.
  opened.catch(() => transactions.delete(txId));
  transactions.set(txId, { opened, end, done });
  return opened.then(() => undefined);
}

/** @param {number} txId @param {boolean} commit */
async function finish(txId, commit) {
  const open = transactions.get(txId);
  if (!open) throw new Error(`no open transaction ${txId}`);
  transactions.delete(txId);
  open.end(commit);
  try {
    await open.done;
  } catch (error) {
    if (error !== ROLLBACK) throw error;
  }
}

/** @param {string} channel */
async function listen(channel) {
  // A second listener waits for the first LISTEN, and fails as it did.
  const listening = channels.get(channel);
  if (listening) return void (await listening);
  const stop = db.listen(channel, (payload) => port.postMessage({ notify: channel, payload }));
  channels.set(channel, stop);
  try {
    await stop;
  } catch (error) {
    channels.delete(channel);
    throw error;
  }
}

/** @param {string} channel */
async function unlisten(channel) {
  const stop = channels.get(channel);
  channels.delete(channel);
  if (stop && !db.closed) await (await stop)();
}

/** @param {any} message */
async function handle(message) {
  switch (message.op) {
    case 'query': {
      if (message.tx === undefined) return result(await db.query(message.sql, message.params));
      const open = transactions.get(message.tx);
      if (!open) throw new Error(`no open transaction ${message.tx}`);
      return result(await (await open.opened).query(message.sql, message.params));
    }
    case 'exec':
      await db.exec(message.sql);
      return undefined;
    case 'begin':
      return begin(message.tx);
    case 'end':
      return finish(message.tx, message.commit);
    case 'listen':
      return listen(message.channel);
    case 'unlisten':
      return unlisten(message.channel);
    case 'close':
      if (!db.closed) await db.close();
      return undefined;
    default:
      throw new Error(`unknown operation ${String(message.op)}`);
  }
}

port.on('message', (message) => {
  handle(message).then(
    (value) => port.postMessage({ id: message.id, ok: true, value }),
    (error) => port.postMessage({ id: message.id, ok: false, error: serialize(error) }),
  );
});
