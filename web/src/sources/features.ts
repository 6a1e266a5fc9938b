import type { Connection } from '../connection.js';
import { FEATURES_SNAPSHOT } from '../documents.js';
import type { FeaturesPanel } from '../panels/features.js';
import { featuresSnapshot } from '../schemas.js';
import { Source } from './source.js';

const POLL_MS = 15_000;

/** The features subgraph's part: its health checks and materializations, read every 15 s (it has no stream). */
export class FeaturesSource extends Source {
  constructor(
    connection: Connection,
    note: HTMLElement,
    private readonly panel: FeaturesPanel,
  ) {
    super(connection, note, POLL_MS, ['features:read']);
  }

  protected load(): Promise<string[]> {
    return this.refresh();
  }

  protected override async refresh(): Promise<string[]> {
    const { data, errors } = await this.connection.query(FEATURES_SNAPSHOT, (d) => featuresSnapshot.parse(d));
    this.panel.load(data);
    return errors;
  }
}
