import { createServer } from 'node:net';
import { StartupError } from '../../platform/startup-error.js';

/**
 * Fails fast when the server could not listen on HOST:PORT, before the slow part of a start (database,
 * migrations, composition): a probe listens there and closes at once. PORT 0 (any free port) always works.
 */
export async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port, exclusive: true }, resolve);
    });
  } catch (error) {
    throw listenFailure(error, host, port);
  } finally {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  }
}

/** A failed listen as a one-line StartupError naming the cause (`PORT 4000 is in use on 127.0.0.1`). */
export function listenFailure(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reason =
    code === 'EADDRINUSE'
      ? `PORT ${port} is in use on ${host}`
      : code === 'EACCES' || code === 'EPERM'
        ? `PORT ${port} on ${host} needs privileges this process does not have`
        : code === 'EADDRNOTAVAIL'
          ? `HOST ${host} is not an address of this machine`
          : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
            ? `HOST ${host} cannot be resolved`
            : null;
  return reason ? new StartupError(reason, { cause: error }) : error;
}
