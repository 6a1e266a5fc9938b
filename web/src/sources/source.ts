import type { Connection } from '../connection.js';
import { fill } from '../dom.js';
import type { Viewer } from '../schemas.js';

/**
 * One subgraph's part of the page. `load` runs once per page (a cursor, the snapshot after it, the streams
 * from that cursor) and again only if it did not finish, for example because the socket dropped midway;
 * the streams themselves resume on every reconnect. `refresh` re-reads what has no stream, every `pollMs`
 * and after a reconnect. A failure is shown in the panel's note and retried. A part whose scopes the
 * page's principal does not hold is not asked for: its note says which scopes it needs.
 */
export abstract class Source {
  private loaded = false;
  private running: Promise<void> | null = null;
  private withheld = false;

  constructor(
    protected readonly connection: Connection,
    private readonly note: HTMLElement,
    pollMs: number | null,
    /** The scopes its documents need (gateway/security/authorization.ts; docs/operations.md, "Auth"). */
    private readonly needs: readonly string[],
  ) {
    if (pollMs !== null) setInterval(() => this.poll(), pollMs);
  }

  /** Returns the partial errors of its answers (a subgraph away while others answered). */
  protected abstract load(): Promise<string[]>;

  protected refresh(): Promise<string[]> {
    return Promise.resolve([]);
  }

  /** After every (re)connect, with the principal the connection acts for (null when it could not be read). */
  connected(viewer: Viewer | null): void {
    const missing = viewer && !viewer.operator ? this.needs.filter((scope) => !viewer.scopes.includes(scope)) : [];
    this.withheld = missing.length > 0;
    this.note.dataset['withheld'] = String(this.withheld);
    if (viewer && this.withheld) {
      this.warn([`Not shown to ${viewer.id}: this part needs ${missing.join(' and ')}`]);
      return;
    }
    void this.run();
  }

  private poll(): void {
    if (this.loaded && !this.withheld && this.connection.state.kind === 'live') void this.run();
  }

  private run(): Promise<void> {
    if (this.running) return this.running;
    const running = this.attempt().finally(() => {
      if (this.running === running) this.running = null;
    });
    this.running = running;
    return running;
  }

  private async attempt(): Promise<void> {
    try {
      let partial: string[];
      if (this.loaded) partial = await this.refresh();
      else {
        partial = await this.load();
        this.loaded = true;
      }
      this.warn(partial);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // A lost connection is shown by the banner, and the next connect runs this again.
      if (this.connection.state.kind === 'live') {
        this.warn([message]);
        setTimeout(() => (this.loaded ? this.poll() : void this.run()), 5000);
      }
    }
  }

  /** Shows partial errors of an answer or a failure; none hides the note. */
  private warn(messages: readonly string[]): void {
    this.note.hidden = messages.length === 0;
    fill(this.note, messages.join(' · '));
  }
}
