/**
 * A start that cannot go on, for a reason the operator can fix (a busy port, an unreachable database, a
 * data directory held by another process). The message is one line naming the cause; the entry points
 * print it without a stack trace and exit non-zero.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}
