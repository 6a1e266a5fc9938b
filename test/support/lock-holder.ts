import { createInterface } from 'node:readline';
import { lockDataDir } from '../../platform/data-dir-lock.js';

/**
 * A process that takes a data directory's lock when told: prints `ready`, waits for `go` on stdin, then
 * prints `locked <pid>` (and holds the lock until stdin ends) or `refused <message>` (and exits 3).
 */
const dir = process.argv[2]!;
const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
for await (const line of lines) {
  if (line.trim() !== 'go') continue;
  try {
    const lock = await lockDataDir(dir);
    process.stdout.write(`locked ${process.pid}\n`);
    lines.on('close', () => {
      lock.release();
      process.exit(0);
    });
  } catch (error) {
    process.stdout.write(`refused ${(error as Error).message}\n`);
    process.exit(3);
  }
}
