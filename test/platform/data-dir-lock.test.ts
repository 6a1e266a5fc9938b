import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE, lockDataDir, type LockRecord } from '../../platform/data-dir-lock.js';
import { StartupError } from '../../platform/startup-error.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ops-supergraph-lock-'));
  dirs.push(dir);
  return dir;
}

const lockPath = (dir: string) => join(dir, LOCK_FILE);
const readLock = (dir: string) => JSON.parse(readFileSync(lockPath(dir), 'utf8')) as LockRecord;
const writeLock = (dir: string, record: Partial<LockRecord>) =>
  writeFileSync(lockPath(dir), JSON.stringify({ hostname: hostname(), started_at: '2026-01-01T00:00:00.000Z', token: 'old', ...record }));

/** The pid of a process that has exited (a lock left by a killed holder names such a pid). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

interface Contender {
  child: ChildProcess;
  lines: string[];
  next(): Promise<string>;
}

/** A process that takes the lock when it is sent `go` (test/support/lock-holder.ts). */
function contender(dir: string): Contender {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/lock-holder.ts', dir], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const lines: string[] = [];
  let waiting: ((line: string) => void) | null = null;
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let at: number;
    while ((at = buffered.indexOf('\n')) !== -1) {
      lines.push(buffered.slice(0, at));
      buffered = buffered.slice(at + 1);
    }
    if (waiting && lines.length > 0) {
      const resolve = waiting;
      waiting = null;
      resolve(lines.shift()!);
    }
  });
  return {
    child,
    lines,
    next: () =>
      lines.length > 0
        ? Promise.resolve(lines.shift()!)
        : new Promise<string>((resolve, reject) => {
            waiting = resolve;
            child.once('exit', (code) => reject(new Error(`lock holder exited (${code}) without a line`)));
          }),
  };
}

describe('one writer per data directory (the lock file)', () => {
  it('is refused to a second taker in the same process, and free again once released', async () => {
    const dir = tempDir();
    const lock = await lockDataDir(dir);
    expect(readLock(dir)).toMatchObject({ pid: process.pid, hostname: hostname() });
    const second = lockDataDir(dir);
    await expect(second).rejects.toBeInstanceOf(StartupError);
    await expect(second).rejects.toThrow(`DATA_DIR ${dir} is in use by this process (pid ${process.pid})`);
    lock.release();
    lock.release();
    const again = await lockDataDir(dir);
    expect(readLock(dir).token).not.toBe(undefined);
    again.release();
    expect(() => readFileSync(lockPath(dir))).toThrow(/ENOENT/);
  });

  it('takes over a lock whose holder no longer runs, names our own pid or is unreadable', async () => {
    const dir = tempDir();
    for (const stale of [{ pid: await deadPid() }, { pid: process.pid, token: 'earlier-run-same-pid' }, null]) {
      if (stale) writeLock(dir, stale);
      else writeFileSync(lockPath(dir), 'not a lock record');
      const lock = await lockDataDir(dir);
      expect(readLock(dir)).toMatchObject({ pid: process.pid });
      lock.release();
    }
  });

  it('refuses a lock held by a live process (naming it) or by another host; a reused pid does not count', async () => {
    const dir = tempDir();
    const holder = contender(dir);
    expect(await holder.next()).toBe('ready');
    holder.child.stdin!.write('go\n');
    expect(await holder.next()).toBe(`locked ${holder.child.pid}`);
    await expect(lockDataDir(dir)).rejects.toThrow(new RegExp(`^DATA_DIR ${dir} is in use by process ${holder.child.pid} since `));

    // The same pid, but a process that started at another time: the pid was reused, the holder is gone.
    const record = readLock(dir);
    expect(record.proc_start).toMatch(/^\d+$/);
    writeLock(dir, { ...record, proc_start: String(Number(record.proc_start) + 1) });
    const lock = await lockDataDir(dir);
    lock.release();

    writeLock(dir, { pid: 4242, hostname: 'elsewhere.example' });
    await expect(lockDataDir(dir)).rejects.toThrow(`DATA_DIR ${dir} is in use by process 4242 on host elsewhere.example since`);
    holder.child.stdin!.end();
  });

  it('of four processes racing for one stale lock, exactly one wins and the others name it', async () => {
    const dir = tempDir();
    writeLock(dir, { pid: await deadPid() });
    const racers = [contender(dir), contender(dir), contender(dir), contender(dir)];
    for (const r of racers) expect(await r.next()).toBe('ready');
    for (const r of racers) r.child.stdin!.write('go\n');
    const outcomes = await Promise.all(racers.map((r) => r.next()));
    const winners = outcomes.filter((o) => o.startsWith('locked '));
    expect(winners, outcomes.join('\n')).toHaveLength(1);
    const winner = Number(winners[0]!.slice('locked '.length));
    expect(readLock(dir).pid).toBe(winner);
    for (const o of outcomes.filter((o) => !o.startsWith('locked ')))
      expect(o).toMatch(new RegExp(`^refused DATA_DIR ${dir} is in use by process ${winner} since `));
    // The winner releases on a clean stop.
    const won = racers.find((r) => r.child.pid === winner)!;
    won.child.stdin!.end();
    await new Promise((resolve) => won.child.once('exit', resolve));
    expect(() => readFileSync(lockPath(dir))).toThrow(/ENOENT/);
  }, 120_000);
});
