import type { Connection } from '../connection.js';
import { OPTIMIZATION_CURSOR, OPTIMIZATION_SNAPSHOT, RUN_EVENTS, VESSEL_EVENTS, VESSEL_FLEET } from '../documents.js';
import { fixed, label, token } from '../dom.js';
import type { FeedPanel } from '../panels/feed.js';
import type { OptimizationPanel } from '../panels/optimization.js';
import { optimizationCursor, optimizationSnapshot, runEvent, vesselEvent, vesselFleet } from '../schemas.js';
import { observeServerTime } from '../server-time.js';
import { Source } from './source.js';

const POLL_MS = 10_000;

/**
 * The optimization subgraph's part: the fleet snapshot and the vessel position stream, run completions as
 * a stream, and the status and run list (runs that start have no event) read every 10 s.
 */
export class OptimizationSource extends Source {
  constructor(
    connection: Connection,
    note: HTMLElement,
    private readonly panel: OptimizationPanel,
    private readonly feed: FeedPanel,
  ) {
    super(connection, note, POLL_MS, ['optimization:read']);
  }

  protected async load(): Promise<string[]> {
    const { data: cursor } = await this.connection.query(OPTIMIZATION_CURSOR, (d) => optimizationCursor.parse(d));
    const after = cursor.optimizationEventCursor;
    const fleet = await this.connection.query(VESSEL_FLEET, (d) => vesselFleet.parse(d));
    const snapshot = fleet.data.vesselFleet;
    if (snapshot) this.panel.fleet(snapshot.tick, snapshot.vessels, snapshot.speedZones);
    const errors = [...fleet.errors, ...(await this.refresh())];
    this.connection.stream({
      query: VESSEL_EVENTS,
      after,
      parse: (d) => vesselEvent.parse(d).vesselPositionsChanged,
      cursorOf: (e) => e.cursor,
      onEvent: (e) => {
        observeServerTime(e.at);
        this.panel.positions(e);
      },
    });
    this.connection.stream({
      query: RUN_EVENTS,
      after,
      parse: (d) => runEvent.parse(d).quantumRunCompleted,
      cursorOf: (e) => e.cursor,
      onEvent: (e) => {
        observeServerTime(e.at);
        this.panel.run(e.run);
        const ratio = e.run.result ? ` · ratio ${fixed(e.run.result.optimalityRatio, 3)}, refined ${fixed(e.run.result.refined.ratio, 3)}` : '';
        this.feed.add({
          cursor: e.cursor,
          stream: 'runs',
          source: 'optimization',
          at: e.at,
          title: `run ${e.run.id.slice(0, 8)} ${label(e.status)}`,
          detail: `${label(e.run.problem)} · ${e.run.qubits} qubits${ratio}`,
          tone: token(e.status),
          data: { run: e.run.id },
        });
      },
    });
    return errors;
  }

  protected override async refresh(): Promise<string[]> {
    const { data, errors } = await this.connection.query(OPTIMIZATION_SNAPSHOT, (d) => optimizationSnapshot.parse(d));
    this.panel.load(data);
    return errors;
  }
}
