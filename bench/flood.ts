import { loadConfig } from '../platform/config.js';
import { startServer } from '../gateway/server.js';
import { floodWhileMeasuring, hostileRequests } from './hostile.js';

/*
 * `npm run bench -- flood`: the worst requests a client can build under the body limit (bench/hostile.ts),
 * sent from 8 connections for 10 s (at most 3,000 requests) against a server in this process; prints what
 * each was answered, the server's event loop delay and how /health fared meanwhile. A second run with every
 * request limit raised out of reach (smaller requests, each once) shows what the limits are worth.
 */
export default async function flood(): Promise<void> {
  const rows: { setting: string; requests: number; p50: number; p99: number; max: number; health: string }[] = [];
  const bodyLimit = loadConfig({}).BODY_LIMIT_BYTES;
  const unlimited = {
    GRAPHQL_MAX_TOKENS: '1000000',
    GRAPHQL_MAX_DEPTH: '1000',
    GRAPHQL_MAX_ALIASES: '100000',
    GRAPHQL_MAX_ROOT_FIELDS: '100000',
    GRAPHQL_MAX_FIELDS: '1000000',
    GRAPHQL_MAX_DIRECTIVES: '100000',
    GRAPHQL_MAX_COST: '100000000',
  };
  const runs = [
    { setting: 'default limits, full-size requests', env: {}, requests: hostileRequests(bodyLimit), concurrency: 8, seconds: 10, maxRequests: 3000 },
    // Without the limits, full-size documents would hold the loop for minutes and the fragment bomb forever:
    // this run sends requests a hundredth of the size, each once, to show what the limits are worth.
    {
      setting: 'limits out of reach, 1/100-size requests, each once',
      env: unlimited,
      requests: hostileRequests(bodyLimit / 100).filter((r) => r.name !== 'fragment bomb'),
      concurrency: 1,
      seconds: 120,
      maxRequests: 10,
    },
  ];
  for (const run of runs) {
    const config = loadConfig({ PORT: '0', DATA_DIR: ':memory:', LOG_LEVEL: 'silent', ...run.env });
    const server = await startServer({ config });
    const result = await floodWhileMeasuring(server.url, run.requests, { concurrency: run.concurrency, seconds: run.seconds, maxRequests: Math.min(run.maxRequests, run.requests.length * 1000) });
    console.log(`\n${run.setting}: ${result.requests} requests in ${result.seconds} s`);
    for (const [key, n] of Object.entries(result.answers).sort()) console.log(`  ${key.padEnd(48)} ${n}`);
    rows.push({ setting: run.setting, requests: result.requests, ...result.loopDelay, health: `${result.health.ok}/${result.health.asked} ok, slowest ${Math.round(result.health.maxMs)} ms` });
    await server.close();
  }
  console.log('\nevent loop delay of the server (ms) while flooded:');
  console.table(rows);
}
