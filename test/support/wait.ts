/**
 * How long a test waits for a condition before it fails. An upper bound only: a passing wait returns as
 * soon as its condition holds, so this can be generous enough for a busy machine without slowing the suite.
 */
export const WAIT_MS = 60_000;

/**
 * Waits until `check` holds, polling it (5 ms, growing to 50 ms), and fails after `timeoutMs` with a
 * message naming `what` (and `detail()`, when given, for the state at that moment).
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  options: { timeoutMs?: number; detail?: () => unknown } = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? WAIT_MS;
  const deadline = Date.now() + timeoutMs;
  for (let pause = 5; !(await check()); pause = Math.min(pause * 2, 50)) {
    if (Date.now() >= deadline) {
      const detail = options.detail ? `; ${JSON.stringify(options.detail())}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** `promise`, or a failure naming `what` if it has not settled within `timeoutMs`. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Waits until `check` yields a value (anything but null, undefined or false) and returns it, polling as
 * `until` does; fails after `timeoutMs` naming `what`.
 */
export async function waitFor<T>(check: () => Promise<T | null | undefined | false>, what: string, options: { timeoutMs?: number } = {}): Promise<T> {
  let value: T | null | undefined | false = null;
  await until(
    async () => {
      value = await check();
      return value !== null && value !== undefined && value !== false;
    },
    what,
    options,
  );
  return value as T;
}
