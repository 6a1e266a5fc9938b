import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner } from '../../platform/principal.js';

/*
 * The stock peer of `npm run bench -- gateway`: @apollo/gateway over the composed supergraph and
 * @apollo/server's standalone server, each with its default settings. Only the supergraph file (the
 * benchmark's copy, with this run's subgraph URLs) and the port are given. Telemetry stays off, as in
 * the project's server, so nothing leaves the machine.
 *
 * One addition: the subgraph servers serve only calls signed with PRINCIPAL_SECRET, so each subgraph call
 * carries the project's signed principal header (the demo principal, as the project's gateway sends in
 * demo mode), made by the project's own PrincipalSigner over the exact body sent. Every gateway compared
 * pays the same signing work per call. The data source's stock fetcher still sends the call.
 */
env['APOLLO_TELEMETRY_DISABLED'] ??= 'true';
const signer = PrincipalSigner.from(env['PRINCIPAL_SECRET']);
if (!signer) throw new Error('PRINCIPAL_SECRET: needed to sign the calls to the subgraph servers (the benchmark sets it)');
const supergraphSdl = readFileSync(env['SUPERGRAPH_FILE'] ?? 'schema/supergraph.graphql', 'utf8');
const gateway = new ApolloGateway({
  supergraphSdl,
  buildService: ({ name, url }) => {
    const source = new RemoteGraphQLDataSource({ url });
    const stock = source.fetcher;
    source.fetcher = (input, init = {}) => {
      const { pathname, search } = new URL(input);
      const body = typeof init.body === 'string' ? init.body : (init.body?.toString('utf8') ?? '');
      const principal = signer.sign(DEMO_PRINCIPAL, {
        subgraph: name,
        method: init.method ?? 'GET',
        path: `${pathname}${search}`,
        body,
        idempotencyKey: init.headers?.['idempotency-key'],
      });
      return stock(input, { ...init, headers: { ...init.headers, [PRINCIPAL_HEADER]: principal } });
    };
    return source;
  },
});
const server = new ApolloServer({ gateway });
const { url } = await startStandaloneServer(server, { listen: { host: '127.0.0.1', port: Number(env['PORT'] ?? 4000) } });
console.log(`stock @apollo/gateway serving ${url}`);
const stop = () => void server.stop().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
