// @ts-check
/*
 * The embedded database's thread (platform/db.ts, `openPglite`). PGlite is PostgreSQL compiled to
 * WebAssembly and runs wherever it is called: on the server's thread it would start (about 0.3 s of
 * WebAssembly on an idle core) and answer every statement there. Here it runs beside that thread, so the
 * start loads and builds the server while the database opens, and statements run beside resolvers.
 *
 * Plain JavaScript with no import of the project's own: the same file runs under the test runner (from
 * the TypeScript tree) and from the compiled server, which keeps its source files' URLs (tools/build.mjs).
 *
 * Messages in: `{ id, op, ... }` (query, exec, begin, end, listen, unlisten, close), each answered once
 * by `{ id, ok: true, value }` or `{ id, ok: false, error }`; NOTIFY payloads go out as `{ notify, payload }`.
 * A transaction is held open between `begin` and `end` (PGlite runs one at a time: every other statement
 * waits for it, as on one connection).
 */
import { PGlite } from '@electric-sql/pglite';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { dataDir, compileCache } = /** @type {{ dataDir?: string; compileCache?: string }} */ (workerData);
if (compileCache) createRequire(import.meta.url)('node:module').enableCompileCache?.(compileCache);

/** Type oid of int8 (bigint, bigserial, count(*)). */
const INT8_OID = 20;

/**
 * Reads an int8 as a JS number. A value a number cannot hold exactly is refused, never rounded: read such
 * columns as text (`id::text`, as the outbox cursor does).
 * @param {string} text
 */
function parseInt8(text) {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 value ${text} is not a safe integer (beyond 2^53); select it as text`);
  return value;
}

/**
 * An error as it crosses to the server's thread: its class name, message and every field of plain value
 * (SQLSTATE `code`, `constraint`, `detail`, `routine`, ...), which is what the error classification reads.
 * @param {unknown} error
 */
function serialize(error) {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  /** @type {Record<string, string | number | boolean | null>} */
  const fields = {};
  for (const [key, value] of Object.entries(error)) {
    if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[key] = value;
  }
  return { name: error.name, message: error.message, fields };
}

/** @param {{ rows: unknown[]; affectedRows?: number }} res */
const result = (res) => ({ rows: res.rows, affectedRows: res.affectedRows ?? 0 });

/** @type {PGlite} */
let db;
try {
  db = dataDir ? new PGlite(dataDir, { parsers: { [INT8_OID]: parseInt8 } }) : new PGlite({ parsers: { [INT8_OID]: parseInt8 } });
  await db.waitReady;
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ ready: false, error: serialize(error) });
  port.close();
  throw error;
}

/**
 * Open transactions by id: the handle PGlite gave, and how to end it (resolve: COMMIT; reject: ROLLBACK).
 * @type {Map<number, { tx: import('@electric-sql/pglite').Transaction | null; end: (commit: boolean) => void; done: Promise<unknown> }>}
 */
const transactions = new Map();
let lastTransaction = 0;
/** A rollback asked for: what the transaction's function "throws" so that PGlite rolls back. */
const ROLLBACK = Symbol('rollback');
/** Channels listened to, with the function that stops listening. @type {Map<string, Promise<() => Promise<void>>>} */
const channels = new Map();

async function begin() {
  const txId = ++lastTransaction;
  /** @type {(value?: unknown) => void} */
  let began = () => undefined;
  const open = new Promise((resolve) => (began = resolve));
  /** @type {(commit: boolean) => void} */
  let end = () => undefined;
  const ended = new Promise((resolve, reject) => (end = (commit) => (commit ? resolve(undefined) : reject(ROLLBACK))));
  /** @type {{ tx: import('@electric-sql/pglite').Transaction | null; end: (commit: boolean) => void; done: Promise<unknown> }} */
  const record = { tx: null, end, done: Promise.resolve() };
  record.done = db.transaction(async (tx) => {
    record.tx = tx;
    transactions.set(txId, record);
    began();
    await ended;
  });
  // A transaction that cannot begin (a closed database) settles `done` before it opens.
  await Promise.race([open, record.done]);
  if (!transactions.has(txId)) await record.done;
  return txId;
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
  if (channels.has(channel)) return;
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
      const on = message.tx === undefined ? db : transactions.get(message.tx)?.tx;
      if (!on) throw new Error(`no open transaction ${message.tx}`);
      return result(await on.query(message.sql, message.params));
    }
    case 'exec':
      await db.exec(message.sql);
      return undefined;
    case 'begin':
      return begin();
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
