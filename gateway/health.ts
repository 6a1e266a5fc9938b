/*
 * Probe paths, open without a key (declared public on their routes): `/health` (the full report; 503 when
 * not ready), `/health/ready` (readiness: the same report, 200 or 503) and `/health/live` (liveness: 200
 * whenever the process serves).
 */

/** How long a readiness check may take before it counts as not ready (probes time out in seconds). */
export const READY_CHECK_TIMEOUT_MS = 2000;

/** `check()`, false when it throws or takes longer than READY_CHECK_TIMEOUT_MS. */
export async function readyWithin(check: () => Promise<boolean>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), READY_CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([check().catch(() => false), late]);
  } finally {
    clearTimeout(timer);
  }
}
