import { readFile } from 'node:fs/promises';
import module, { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** What PGlite answers a statement with, as it crosses from the database's thread. */
interface RawResult<R> {
  rows: R[];
  affectedRows: number;
}

interface SerializedError {
  name: string;
  message: string;
  fields: Record<string, string | number | boolean | null>;
}

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: SerializedError };
type Message = Reply | { notify: string; payload: string } | { ready: true } | { ready: false; error: SerializedError };

/** Databases this process has opened on threads. */
let openedInProcess = 0;
/** A compiled `WebAssembly.Module` (the server's type library declares no WebAssembly values). */
type WasmModule = object;
const wasm = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> } }).WebAssembly;
let assets: Promise<{ wasmModule: WasmModule; fsBundle: SharedArrayBuffer }> | null = null;

/** PGlite's compiled WebAssembly and its file bundle, made once per process (structured clone shares both with a thread). */
function sharedAssets(): Promise<{ wasmModule: WasmModule; fsBundle: SharedArrayBuffer }> {
  assets ??= (async () => {
    const resolve = createRequire(import.meta.url).resolve;
    const [code, data] = await Promise.all([readFile(resolve('@electric-sql/pglite/pglite.wasm')), readFile(resolve('@electric-sql/pglite/pglite.data'))]);
    const fsBundle = new SharedArrayBuffer(data.byteLength);
    new Uint8Array(fsBundle).set(data);
    return { wasmModule: await wasm.compile(code), fsBundle };
  })();
  return assets;
}

/** The message every call fails with once the database is closed (platform/db-errors.ts reads it as an outage). */
const CLOSED = 'PGlite is closed';

/** An error of the database's thread, as the error classification reads it: class name, message, SQLSTATE and fields. */
function revive(error: SerializedError): Error {
  const classes: Record<string, ErrorConstructor> = { RangeError, TypeError, SyntaxError };
  const Class = Object.hasOwn(classes, error.name) ? classes[error.name]! : Error;
  const revived = new Class(error.message);
  if (revived.name !== error.name) Object.defineProperty(revived, 'name', { value: error.name, configurable: true, writable: true });
  return Object.assign(revived, error.fields);
}

/**
 * PGlite on a thread of its own (platform/pglite-worker.mjs), called as PGlite is: the server's thread
 * builds and serves while the database opens and runs statements. Parameters and rows cross by structured
 * clone (strings, numbers, BigInt, Date, Uint8Array, JSON objects). The thread keeps the process alive
 * only while a call is waiting on it.
 */
export class PgliteThread {
  #worker: Worker;
  #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  #lastId = 0;
  #lastTransaction = 0;
  /** Set when close() begins or the thread stops: from then on every call fails at once. */
  #closed = false;
  #stopped: Error | null = null;
  #closing: Promise<void> | null = null;
  #listeners = new Map<string, Set<(payload: string) => void>>();

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (message: Message) => {
      if ('notify' in message) {
        for (const handler of this.#listeners.get(message.notify) ?? []) handler(message.payload);
      } else if ('id' in message) {
        const call = this.#pending.get(message.id);
        if (!call) return;
        this.#pending.delete(message.id);
        if (this.#pending.size === 0) worker.unref();
        if (message.ok) call.resolve(message.value);
        else call.reject(revive(message.error));
      }
    });
    const stop = (reason: Error) => {
      // A thread ended by close() stopped as asked: later calls say the database is closed, not that it crashed.
      if (this.#closing) reason = new Error(CLOSED);
      this.#closed = true;
      this.#stopped ??= reason;
      for (const call of this.#pending.values()) call.reject(reason);
      this.#pending.clear();
    };
    worker.on('error', (error) => stop(new Error(`${CLOSED}: the embedded database's thread stopped (${error.message})`, { cause: error })));
    worker.on('exit', (code) => stop(new Error(`${CLOSED}: the embedded database's thread exited (${code})`)));
  }

  /** Starts the thread and opens PGlite on `dataDir` (in memory without one); rejects as PGlite would. */
  static async open(dataDir: string | undefined): Promise<PgliteThread> {
    const compileCache = (module as { getCompileCacheDir?: () => string | undefined }).getCompileCacheDir?.();
    // The first database of a process loads PGlite's WebAssembly on its own thread; from the second on, the
    // threads share one compiled module and one copy of its file bundle (a process that opens several, as
    // tests and benchmarks do, compiles and reads them once).
    const shared = openedInProcess++ > 0 ? await sharedAssets() : null;
    const worker = new Worker(new URL('./pglite-worker.mjs', import.meta.url), {
      // The thread's own modules (PGlite) use the process's compile cache too: it is turned on per thread.
      workerData: { dataDir, compileCache, ...(shared ? { wasmModule: shared.wasmModule, fsBundle: shared.fsBundle } : {}) },
      // The thread loads PGlite and nothing else: no loader or profiler flags of the process.
      execArgv: [],
    });
    let onMessage: (message: Message) => void = () => undefined;
    let onError: (error: Error) => void = () => undefined;
    let onExit: (code: number) => void = () => undefined;
    const ready = await new Promise<Message>((resolve, reject) => {
      onMessage = resolve;
      onError = reject;
      onExit = (code) => reject(new Error(`the embedded database's thread exited (${code}) before it opened`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
    })
      .catch(async (error: unknown) => {
        await worker.terminate();
        throw error;
      })
      .finally(() => worker.off('message', onMessage).off('error', onError).off('exit', onExit));
    if (!('ready' in ready) || !ready.ready) {
      await worker.terminate();
      throw 'error' in ready ? revive(ready.error) : new Error('the embedded database did not open');
    }
    worker.unref();
    return new PgliteThread(worker);
  }

  /** True once closed, or once the thread stopped; every call then fails. */
  get closed(): boolean {
    return this.#closed;
  }

  #call<T>(message: Record<string, unknown>): Promise<T> {
    if (this.#closed) return Promise.reject(this.#stopped ?? new Error(CLOSED));
    return this.#send(message);
  }

  /** Sends `message` to the thread and resolves with its answer, whether closed or not (close() sends this way). */
  #send<T>(message: Record<string, unknown>): Promise<T> {
    const id = ++this.#lastId;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (this.#pending.size === 1) this.#worker.ref();
      try {
        this.#worker.postMessage({ ...message, id });
      } catch (error) {
        // A parameter structured clone cannot copy (a function, a Proxy): refused here, nothing sent.
        this.#pending.delete(id);
        if (this.#pending.size === 0) this.#worker.unref();
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  query<R>(sql: string, params?: unknown[], tx?: number): Promise<RawResult<R>> {
    return this.#call({ op: 'query', sql, params, tx });
  }

  exec(sql: string): Promise<void> {
    return this.#call({ op: 'exec', sql });
  }

  /**
   * Runs `fn` in one transaction: COMMIT when it resolves, ROLLBACK when it throws (its error rethrown).
   * BEGIN is not waited for: the first statement goes with it and fails as BEGIN did.
   */
  async transaction<T>(fn: (query: <R>(sql: string, params?: unknown[]) => Promise<RawResult<R>>) => Promise<T>): Promise<T> {
    // A closed database runs nothing of `fn`, as a BEGIN that failed first would not.
    if (this.#closed) throw this.#stopped ?? new Error(CLOSED);
    const tx = ++this.#lastTransaction;
    const began = this.#call<void>({ op: 'begin', tx });
    began.catch(() => undefined);
    let result: T;
    try {
      result = await fn((sql, params) => this.query(sql, params, tx));
      await began;
    } catch (error) {
      // A transaction that did not begin has nothing to roll back; its own error is the one that says why.
      // (#call rejects with Errors only: revived from the thread, or the closed database's.)
      const beginError = await began.then(
        () => null,
        (e: unknown) => e as Error,
      );
      if (beginError) throw beginError;
      await this.#call({ op: 'end', tx, commit: false }).catch(() => undefined);
      throw error;
    }
    await this.#call({ op: 'end', tx, commit: true });
    return result;
  }

  /** Subscribes to NOTIFY on `channel`; resolves to the function that unsubscribes. */
  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    let handlers = this.#listeners.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.#listeners.set(channel, handlers);
    }
    handlers.add(onPayload);
    try {
      await this.#call({ op: 'listen', channel });
    } catch (error) {
      handlers.delete(onPayload);
      throw error;
    }
    return async () => {
      handlers.delete(onPayload);
      if (handlers.size === 0 && this.#listeners.get(channel) === handlers) {
        this.#listeners.delete(channel);
        await this.#call({ op: 'unlisten', channel });
      }
    };
  }

  /** Closes PGlite (its files written) and ends the thread; a second call waits for the first. */
  close(): Promise<void> {
    if (this.#closing) return this.#closing;
    if (this.#closed) return Promise.resolve();
    const closed = this.#send<void>({ op: 'close' });
    // Calls made from now on fail at once; those sent before run first (PGlite closes after them).
    this.#closed = true;
    this.#closing = closed.finally(() => this.#worker.terminate()).then(() => undefined);
    return this.#closing;
  }
}
