import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StartupError } from './startup-error.js';

/** The lock file, inside the data directory (PGlite ignores files it does not know). */
export const LOCK_FILE = 'ops-supergraph.lock';

/** Who holds a data directory: written whole, once, when the lock is taken. */
export interface LockRecord {
  pid: number;
  hostname: string;
  /** When the holder took the lock (ISO 8601). */
  started_at: string;
  /** The holder's start time in clock ticks since boot (Linux `/proc/<pid>/stat`), to tell a reused pid. */
  proc_start?: string;
  /** Tells this holder's lock from a later one with the same pid. */
  token: string;
}

export interface DataDirLock {
  /** Absolute path of the lock file. */
  readonly path: string;
  /** Removes the lock file if it is still this holder's (idempotent). */
  release(): void;
}

/** Lock files held by this process: a pid equal to ours is only alive if it is in here. */
const heldHere = new Set<string>();

/**
 * Takes the one-writer lock of an embedded data directory (creating the directory when missing). The
 * lock file is created atomically (written aside, then hard-linked into place, which fails when the name
 * exists), so of two processes starting at once exactly one wins. A lock whose holder no longer runs (a
 * killed process) is taken over, under a second lock so two processes cannot both take over the same one.
 * Throws a StartupError naming the directory and the process that holds it.
 */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const absolute = resolve(dir);
  const path = join(absolute, LOCK_FILE);
  try {
    mkdirSync(absolute, { recursive: true });
  } catch (error) {
    throw new StartupError(`cannot use DATA_DIR ${absolute}: ${fsReason(error)}`, { cause: error });
  }
  const record: LockRecord = {
    pid: process.pid,
    hostname: hostname(),
    started_at: new Date().toISOString(),
    ...optional('proc_start', processStart(process.pid)),
    token: randomBytes(8).toString('hex'),
  };
  // Bounded: another process in the middle of a takeover holds the guard for a few milliseconds.
  for (let attempt = 0; attempt < 100; attempt++) {
    if (createExclusive(path, record, absolute)) {
      heldHere.add(path);
      return { path, release: () => release(path, record.token) };
    }
    const holder = readRecord(path);
    if (holder === undefined) continue; // released between our attempt and the read
    if (holder !== null && isAlive(holder, path)) {
      const who = holder.pid === process.pid ? `this process (pid ${holder.pid})` : `process ${holder.pid}`;
      const where = holder.hostname === hostname() ? '' : ` on host ${holder.hostname}`;
      throw new StartupError(
        `DATA_DIR ${absolute} is in use by ${who}${where} since ${holder.started_at}: one process per data directory (stop it, or use another DATA_DIR or DATABASE_URL)`,
      );
    }
    if (!takeOver(path, holder, record, absolute)) await sleep(20);
  }
  throw new StartupError(`DATA_DIR ${absolute}: could not take ${LOCK_FILE} (another process keeps replacing it)`);
}

/** Creates `path` with `record` unless it exists; false when it does. */
function createExclusive(path: string, record: LockRecord, dir: string): boolean {
  const aside = `${path}.${record.pid}.${record.token}.tmp`;
  try {
    writeFileSync(aside, `${JSON.stringify(record)}\n`, { flag: 'wx', mode: 0o644 });
    linkSync(aside, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new StartupError(`cannot use DATA_DIR ${dir}: ${fsReason(error)}`, { cause: error });
  } finally {
    try {
      unlinkSync(aside);
    } catch {
      // Never created (the directory refused it).
    }
  }
}

/** The record in `path`: undefined when there is no file, null when it cannot be read as a lock record. */
function readRecord(path: string): LockRecord | null | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return null;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockRecord>;
    if (Number.isSafeInteger(parsed.pid) && typeof parsed.hostname === 'string' && typeof parsed.token === 'string') {
      return parsed as LockRecord;
    }
  } catch {
    // Not ours, or damaged: treated as stale.
  }
  return null;
}

/**
 * Whether the holder still runs. A holder on another host cannot be checked and counts as alive. On this
 * host: our own pid is alive only if this process took the lock (a container restarted with the same
 * pid is not the holder); another pid must exist (`kill(pid, 0)`) and, where Linux tells, have started
 * when the holder did (a pid reused by an unrelated process is not the holder).
 */
function isAlive(holder: LockRecord, path: string): boolean {
  if (holder.hostname !== hostname()) return true;
  if (holder.pid === process.pid) return heldHere.has(path);
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = processStart(holder.pid);
  return holder.proc_start === undefined || started === undefined || started === holder.proc_start;
}

/**
 * Removes a stale lock, under a guard file so that of two processes that found the same stale lock one
 * removes it and the other then finds the winner's fresh one. False when the guard is held by someone else.
 */
function takeOver(path: string, stale: LockRecord | null, record: LockRecord, dir: string): boolean {
  const guard = `${path}.takeover`;
  if (!createExclusive(guard, record, dir)) {
    const owner = readRecord(guard);
    // A process that died within the few statements below leaves its guard: remove it and try again.
    if (owner !== undefined && (owner === null || !isAlive(owner, guard))) removeIf(guard, owner?.token ?? null);
    return false;
  }
  try {
    const current = readRecord(path);
    if (current !== undefined && (current?.token ?? null) === (stale?.token ?? null)) unlinkSync(path);
  } finally {
    unlinkSync(guard);
  }
  return true;
}

function release(path: string, token: string): void {
  heldHere.delete(path);
  removeIf(path, token);
}

/** Unlinks `path` if it still holds the record with `token` (null: a record that could not be read). */
function removeIf(path: string, token: string | null): void {
  const current = readRecord(path);
  if (current === undefined || (current?.token ?? null) !== token) return;
  try {
    unlinkSync(path);
  } catch {
    // Already gone.
  }
}

/** The start time of a process in clock ticks since boot (Linux), or undefined where it cannot be read. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}

function fsReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'EROFS') return 'read-only file system';
  if (code === 'ENOTDIR' || code === 'EEXIST') return 'not a directory';
  if (code === 'ENOSPC') return 'no space left on device';
  return code ?? String(error);
}
