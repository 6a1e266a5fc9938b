import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';

/*
 * The stock peer of `npm run bench -- gateway`: @apollo/gateway over the composed supergraph and
 * @apollo/server's standalone server, each with its default settings. Only the supergraph file (the
 * benchmark's copy, with this run's subgraph URLs) and the port are given. Telemetry stays off, as in
 * the project's server, so nothing leaves the machine.
 */
env['APOLLO_TELEMETRY_DISABLED'] ??= 'true';
const supergraphSdl = readFileSync(env['SUPERGRAPH_FILE'] ?? 'schema/supergraph.graphql', 'utf8');
const server = new ApolloServer({ gateway: new ApolloGateway({ supergraphSdl }) });
const { url } = await startStandaloneServer(server, { listen: { host: '127.0.0.1', port: Number(env['PORT'] ?? 4000) } });
console.log(`stock @apollo/gateway serving ${url}`);
const stop = () => void server.stop().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
