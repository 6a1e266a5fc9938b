/**
 * `pending`'s outcome, or `late()` thrown once `ms` have passed without one; an outcome that comes after
 * that is dropped. The timer is cleared as soon as `pending` settles and never holds the process open.
 */
export function withDeadline<T>(pending: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    timer.unref();
    pending.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
