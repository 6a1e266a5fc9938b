/**
 * A bounded push-to-pull async iterator. Unlike an async generator, `return()` ends it at once even
 * while a consumer waits in `next()`, so an unsubscribe never hangs until the next event.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly queue: T[] = [];
  private waiting: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  private roomWaiters: { threshold: number; resolve: () => void }[] = [];
  private finished = false;
  /** end() was called: no more pushes; the consumer drains what is queued, then sees done. */
  private ending = false;
  private failure: { error: unknown } | null = null;

  constructor(
    /** Called once when the channel ends, however it ends. */
    private readonly onClose: () => void = () => undefined,
    /** Queue bound; a push beyond it fails the channel with `overflowError()`. */
    private readonly capacity = Number.POSITIVE_INFINITY,
    private readonly overflowError: () => Error = () => new Error('channel overflow'),
  ) {}

  get size(): number {
    return this.queue.length;
  }

  get closed(): boolean {
    return this.finished;
  }

  /** Delivers a value; false when the channel has ended (or just overflowed). */
  push(value: T): boolean {
    if (this.finished || this.failure || this.ending) return false;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w.resolve({ value, done: false });
      return true;
    }
    if (this.queue.length >= this.capacity) {
      this.fail(this.overflowError());
      return false;
    }
    this.queue.push(value);
    return true;
  }

  /** Ends the channel with an error, delivered after what is already queued. */
  fail(error: unknown): void {
    if (this.finished || this.failure) return;
    this.failure = { error };
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      this.finish();
      w.reject(error);
    }
  }

  /**
   * Ends the channel without losing anything: later pushes are refused, the consumer still receives
   * every queued value (and a failure already recorded), then done. `return()` is the consumer's way to
   * stop; this is the producer's.
   */
  end(): void {
    if (this.finished || this.ending) return;
    this.ending = true;
    if (this.waiting) {
      // A waiting consumer means an empty queue: nothing is left to deliver.
      this.finish();
    }
  }

  /** Resolves when fewer than `threshold` values wait (or the channel has ended). */
  room(threshold: number): Promise<void> {
    if (this.finished || this.queue.length < threshold) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push({ threshold, resolve }));
  }

  next(): Promise<IteratorResult<T>> {
    const value = this.queue.shift();
    if (this.roomWaiters.length > 0) {
      const ready = this.roomWaiters.filter((w) => this.queue.length < w.threshold);
      if (ready.length > 0) {
        this.roomWaiters = this.roomWaiters.filter((w) => this.queue.length >= w.threshold);
        for (const w of ready) w.resolve();
      }
    }
    if (value !== undefined) return Promise.resolve({ value, done: false });
    if (this.failure) {
      const { error } = this.failure;
      this.finish();
      // The producer's failure, passed on as it was raised (the consumer's `for await` rethrows it).
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      return Promise.reject(error);
    }
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    if (this.ending) {
      this.finish();
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.finish();
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error?: unknown): Promise<IteratorResult<T>> {
    this.finish();
    // The iterator protocol's `throw`: the caller's value, passed back as given.
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
    return Promise.reject(error);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.queue.length = 0;
    const w = this.waiting;
    this.waiting = null;
    w?.resolve({ value: undefined, done: true });
    for (const r of this.roomWaiters) r.resolve();
    this.roomWaiters = [];
    this.onClose();
  }
}
