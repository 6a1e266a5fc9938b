import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { loadConfig } from '../gateway/config.js';

/*
 * `npm run event-stream -- reset`: starts EVENT_STREAM afresh, for the way out of a stream that holds
 * another database's events (/health's event_bus reason). The stream is deleted with every event in it;
 * the relays of this deployment create it again and relay their outbox into it (subscribers resuming from
 * a deleted event are told their cursor expired). Run it only when the stream's events are another
 * database's, or can be let go.
 */

async function main(): Promise<void> {
  const [command] = process.argv.slice(2);
  if (command !== 'reset') {
    console.error('usage: npm run event-stream -- reset   (deletes EVENT_STREAM on EVENT_BUS_URL; this deployment then relays its outbox into a fresh one)');
    process.exit(2);
  }
  const config = loadConfig(process.env);
  if (!config.EVENT_BUS_URL) {
    console.error('EVENT_BUS_URL is not set: there is no event stream to reset');
    process.exit(2);
  }
  const nc = await connect({ servers: config.EVENT_BUS_URL });
  try {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(config.EVENT_STREAM).catch(() => null);
    if (!info) {
      console.log(`stream ${config.EVENT_STREAM} does not exist: nothing to reset`);
      return;
    }
    await jsm.streams.delete(config.EVENT_STREAM);
    console.log(`deleted stream ${config.EVENT_STREAM} (${info.state.messages} events); the relay starts it afresh on its next round`);
  } finally {
    await nc.close();
  }
}

await main();
