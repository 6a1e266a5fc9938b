import './style.css';
import { Connection } from './connection.js';
import { storedKey } from './credential.js';
import { VIEWER } from './documents.js';
import { byId, fill } from './dom.js';
import { BondingPanel } from './panels/bonding.js';
import { ChartPanel } from './panels/chart.js';
import { DeliveriesPanel } from './panels/deliveries.js';
import { FeaturesPanel } from './panels/features.js';
import { FeedPanel } from './panels/feed.js';
import { FleetPanel } from './panels/fleet.js';
import { OptimizationPanel } from './panels/optimization.js';
import { connectionStatus } from './panels/status.js';
import { BondingSource } from './sources/bonding.js';
import { FeaturesSource } from './sources/features.js';
import { viewerAnswer } from './schemas.js';
import { OptimizationSource } from './sources/optimization.js';
import { RentalSource } from './sources/rental.js';

/** The gateway's GraphQL WebSocket, on the origin the page came from. */
function graphqlSocketUrl(): string {
  const url = new URL('graphql', document.baseURI);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

const connection = new Connection({ url: graphqlSocketUrl(), httpUrl: new URL('graphql', document.baseURI).href, credential: storedKey });
connectionStatus(connection, {
  pill: byId('connection'),
  banner: byId('banner'),
  form: byId<HTMLFormElement>('key-form'),
  forget: byId<HTMLButtonElement>('forget-key'),
});

const feed = new FeedPanel(byId('feed-panel'));
const chart = new ChartPanel(byId('chart-panel'), byId('chart-span'));
const sources = [
  new RentalSource(connection, byId('rental-note'), {
    fleet: new FleetPanel(byId('fleet-grid')),
    chart,
    deliveries: new DeliveriesPanel(byId('delivery-panel')),
    feed,
  }),
  new BondingSource(connection, byId('bonding-note'), new BondingPanel(byId('bonding-panel')), feed),
  new OptimizationSource(connection, byId('optimization-note'), new OptimizationPanel(byId('optimization-panel')), feed),
  new FeaturesSource(connection, byId('features-note'), new FeaturesPanel(byId('features-panel'))),
];
// Who the page acts for first: each part asks only for what its principal may see.
const principal = byId('principal');
connection.onConnected(() => void showPrincipal());

/** Asks who the page acts for, then lets each part ask for what that principal may see. */
async function showPrincipal(): Promise<void> {
  const viewer = await connection
    .query(VIEWER, (d) => viewerAnswer.parse(d).viewer)
    .then(
      ({ data }) => data,
      () => null,
    );
  principal.hidden = viewer === null;
  if (viewer) {
    fill(principal, viewer.operator ? `${viewer.id} · operator` : `${viewer.id} · ${viewer.tenant}`);
    principal.title = viewer.operator ? 'every scope over every tenant (ops:admin)' : `scopes: ${viewer.scopes.join(', ') || 'none'}`;
  }
  for (const source of sources) source.connected(viewer);
}
// The chart's time axis moves on between events.
setInterval(() => chart.render(), 5000);
connection.start();
