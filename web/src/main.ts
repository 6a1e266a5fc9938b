import './style.css';
import { Connection } from './connection.js';
import { storedKey } from './credential.js';
import { byId } from './dom.js';
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
import { OptimizationSource } from './sources/optimization.js';
import { RentalSource } from './sources/rental.js';

/** The gateway's GraphQL WebSocket, on the origin the page came from. */
function graphqlSocketUrl(): string {
  const url = new URL('graphql', document.baseURI);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

const connection = new Connection({ url: graphqlSocketUrl(), credential: storedKey });
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
connection.onConnected(() => {
  for (const source of sources) source.connected();
});
// The chart's time axis moves on between events.
setInterval(() => chart.render(), 5000);
connection.start();
