import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { INCOMING_OPERATION } from '../../../gateway/planner/apollo-seam.js';
import type { GatewayContext } from '../../../gateway/pipeline/context.js';
import { RemoteDataSource } from '../../../gateway/sources/remote-data-source.js';
import { PRINCIPAL_HEADER, PrincipalSigner, type Principal } from '../../../platform/principal.js';
import { SubgraphTrust } from '../../../platform/subgraph-trust.js';
import { until } from '../../support/wait.js';

/*
 * The data source that calls subgraph servers, against a real HTTP server on loopback that answers as the
 * test tells it (refusing calls nobody signed, as a subgraph server does): what a call carries (body,
 * forwarded headers, the principal signed over that very call, no credential), what becomes of each kind of answer, and calls given up at their deadline, including
 * calls still waiting for one of the pool's 64 connections.
 */

type Behaviour = (request: IncomingMessage, body: string, response: ServerResponse) => void;

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  closedEarly: boolean;
}

const PRINCIPAL: Principal = { id: 'partner-a', tenant: 'acme', scopes: ['rental:read'] };
const QUERY = 'query Ledger($first: Int) { bookings(first: $first) { id status } }';
const signer = PrincipalSigner.from('remote-data-source-test-secret')!;

let server: Server;
let url: string;
let behaviour: Behaviour;
let received: Received[];
let unsignedCalls = 0;
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      // A call nobody signed (the data source's trust check) is refused, as a subgraph server refuses it.
      if (request.headers[PRINCIPAL_HEADER] === undefined) {
        unsignedCalls++;
        response.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[{"message":"unsigned"}]}');
        return;
      }
      const seen: Received = { headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), closedEarly: false };
      received.push(seen);
      response.on('close', () => {
        if (!response.writableFinished) seen.closedEarly = true;
      });
      behaviour(request, seen.body, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
});

afterAll(async () => {
  for (const response of held) response.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  received = [];
  behaviour = json(200, { data: { bookings: [] } });
});

function json(status: number, body: unknown, headers: Record<string, string> = {}): Behaviour {
  return (_request, _body, response) => {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    response.end(JSON.stringify(body));
  };
}

function source(timeoutMs = 5_000) {
  const failures: unknown[] = [];
  const trust = new SubgraphTrust(new Map([['rental', url]]));
  const data = new RemoteDataSource('rental', url, { timeoutMs, signer, trust, onFailure: (error) => failures.push(error) });
  return { data, failures };
}

function operation(restricted: { maxAge: number; scope?: string }[] = []): GraphQLDataSourceProcessOptions<GatewayContext> {
  const context: GatewayContext = {
    headers: { 'x-request-id': 'req-1', 'idempotency-key': 'idem-1' },
    principal: PRINCIPAL,
    client: { name: null, version: null },
  };
  return {
    kind: INCOMING_OPERATION,
    request: { query: QUERY, variables: { first: 2 }, operationName: 'Ledger', http: undefined },
    incomingRequestContext: { overallCachePolicy: { restrict: (hint: { maxAge: number; scope?: string }) => restricted.push(hint) } },
    context,
    pathInIncomingRequest: [],
  } as unknown as GraphQLDataSourceProcessOptions<GatewayContext>;
}

describe('the remote data source', () => {
  it('sends the operation as @apollo/gateway does, with the forwarded headers and the principal signed over the call, and no credential', async () => {
    const { data, failures } = source();
    const restricted: { maxAge: number; scope?: string }[] = [];
    behaviour = json(200, { data: { bookings: [{ id: 'b1', status: 'CONFIRMED' }] } }, { 'cache-control': 'max-age=30, public' });
    const answer = await data.process(operation(restricted));
    await data.close();

    expect(answer).toEqual({ data: { bookings: [{ id: 'b1', status: 'CONFIRMED' }] } });
    expect(failures).toEqual([]);
    // Asked once whether it refuses a call nobody signed, then called signed.
    expect(unsignedCalls).toBe(1);
    expect(received).toHaveLength(1);
    const [call] = received;
    expect(call!.body).toBe(JSON.stringify({ query: QUERY, variables: { first: 2 }, operationName: 'Ledger' }));
    expect(call!.headers).toMatchObject({
      'content-type': 'application/json',
      'x-request-id': 'req-1',
      'idempotency-key': 'idem-1',
    });
    expect(call!.headers['x-api-key']).toBeUndefined();
    expect(call!.headers['authorization']).toBeUndefined();
    // The signature holds for exactly this call (its Idempotency-Key included), for no other body, and once.
    const signed = call!.headers[PRINCIPAL_HEADER] as string;
    expect(signer.verify(signed, { subgraph: 'rental', method: 'POST', path: '/graphql', body: `${call!.body} `, idempotencyKey: 'idem-1' })).toBeNull();
    expect(signer.verify(signed, { subgraph: 'rental', method: 'POST', path: '/graphql', body: call!.body })).toBeNull();
    expect(signer.verify(signed, { subgraph: 'rental', method: 'POST', path: '/graphql', body: call!.body, idempotencyKey: 'idem-1' })).toEqual(PRINCIPAL);
    expect(signer.verify(signed, { subgraph: 'rental', method: 'POST', path: '/graphql', body: call!.body, idempotencyKey: 'idem-1' })).toBeNull();
    // The subgraph's Cache-Control restricts the operation's policy.
    expect(restricted).toEqual([{ maxAge: 30, scope: 'PUBLIC' }]);
  });

  it('passes on GraphQL errors sent with a 4xx status; a 5xx, a body that is not JSON or broken JSON is the subgraph unavailable', async () => {
    const { data, failures } = source();
    behaviour = json(400, { errors: [{ message: 'Variable "$first" got invalid value "x"', extensions: { code: 'BAD_USER_INPUT' } }] });
    expect(await data.process(operation())).toEqual({
      errors: [{ message: 'Variable "$first" got invalid value "x"', extensions: { code: 'BAD_USER_INPUT' } }],
    });
    expect(failures).toHaveLength(0);

    const unavailable = { errors: [expect.objectContaining({ path: ['bookings'], extensions: expect.objectContaining({ code: 'UPSTREAM_UNAVAILABLE' }) })] };
    behaviour = json(500, { errors: [{ message: 'boom' }] });
    expect(await data.process(operation())).toMatchObject(unavailable);
    expect(String(failures[0])).toBe('500: Internal Server Error');
    expect(failures[0]).toMatchObject({ extensions: { response: { status: 500, body: { errors: [{ message: 'boom' }] } } } });

    behaviour = (_request, _body, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<html></html>');
    };
    expect(await data.process(operation())).toMatchObject(unavailable);
    expect(String(failures[1])).toContain('Expected JSON response body, but received: <html></html>');

    behaviour = (_request, _body, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"data": ');
    };
    expect(await data.process(operation())).toMatchObject(unavailable);
    expect(failures[2]).toBeInstanceOf(SyntaxError);
    await data.close();
  });

  it('reads an answer that arrives in many chunks, multi-byte characters split between them', async () => {
    const { data } = source();
    const name = 'Ünal Øvergård 日本 '.repeat(4_000);
    behaviour = (_request, _body, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const text = Buffer.from(JSON.stringify({ data: { bookings: [{ id: name, status: 'OPEN' }] } }), 'utf8');
      // Seven bytes at a time, so characters are cut between writes.
      for (let at = 0; at < text.length; at += 7 * 1024 + 1) response.write(text.subarray(at, at + 7 * 1024 + 1));
      response.end();
    };
    expect(await data.process(operation())).toEqual({ data: { bookings: [{ id: name, status: 'OPEN' }] } });
    await data.close();
  });

  it('gives up a call not answered within its timeout, aborts it on the connection, and keeps serving', async () => {
    const { data, failures } = source(200);
    behaviour = (_request, _body, response) => void held.push(response);
    const started = performance.now();
    const answer = await data.process(operation());
    const waited = performance.now() - started;
    expect(answer).toMatchObject({ errors: [{ path: ['bookings'], extensions: { code: 'UPSTREAM_UNAVAILABLE', serviceName: 'rental' } }] });
    expect(waited).toBeGreaterThanOrEqual(195);
    expect(String(failures[0])).toBe('Error: subgraph rental did not answer within 200 ms');
    await until(() => received[0]?.closedEarly === true, 'the held request to be aborted');

    behaviour = json(200, { data: { bookings: [] } });
    expect(await data.process(operation())).toEqual({ data: { bookings: [] } });
    expect(failures).toHaveLength(1);
    await data.close();
  });

  it('gives up calls still waiting for a connection at the same deadline as those sent', async () => {
    const { data, failures } = source(300);
    behaviour = (_request, _body, response) => void held.push(response);
    // The pool has 64 connections: six calls wait for one.
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 70 }, () => data.process(operation())));
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(answers.every((a) => a.errors?.[0]?.extensions?.['code'] === 'UPSTREAM_UNAVAILABLE')).toBe(true);
    expect(failures).toHaveLength(70);
    // Every call that reached the server was aborted there (one given up as it reached a connection is
    // not written at all).
    await until(() => received.length >= 64 && received.every((r) => r.closedEarly), 'the sent calls to be aborted', {
      detail: () => ({ received: received.length, closed: received.filter((r) => r.closedEarly).length }),
    });
    behaviour = json(200, { data: { bookings: [] } });
    expect(await data.process(operation())).toEqual({ data: { bookings: [] } });
    await until(() => received.filter((r) => !r.closedEarly).length === 1, 'only the last call to be answered');
    await data.close();
  });

  it('a server that answers a call nobody signed is never sent one: unavailable, until it refuses such calls', async () => {
    let refuses = false;
    const signedCalls: string[] = [];
    const open = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.headers[PRINCIPAL_HEADER] !== undefined) signedCalls.push(String(request.headers['x-request-id']));
        else if (refuses) return void response.writeHead(401).end();
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{"__typename":"Query"}}');
      });
    });
    await new Promise<void>((resolve) => open.listen(0, '127.0.0.1', resolve));
    const target = `http://127.0.0.1:${(open.address() as AddressInfo).port}/graphql`;
    const failures: unknown[] = [];
    const verdicts: string[] = [];
    const trust = new SubgraphTrust(new Map([['rental', target]]), { onVerdict: (_s, v) => verdicts.push(v) });
    const data = new RemoteDataSource('rental', target, { timeoutMs: 5_000, signer, trust, onFailure: (error) => failures.push(error) });
    try {
      expect(await data.process(operation())).toMatchObject({ errors: [{ extensions: { code: 'UPSTREAM_UNAVAILABLE' } }] });
      expect(await data.process(operation())).toMatchObject({ errors: [{ extensions: { code: 'UPSTREAM_UNAVAILABLE' } }] });
      expect(signedCalls).toEqual([]);
      expect(String(failures[0])).toMatch(/answered a call nobody signed/);
      // Fixed: the next call asks again and goes through.
      refuses = true;
      expect(await data.process(operation())).toEqual({ data: { __typename: 'Query' } });
      expect(signedCalls).toEqual(['req-1']);
      expect(verdicts).toEqual(['accepts-unsigned', 'refuses-unsigned']);
    } finally {
      await data.close();
      open.closeAllConnections();
      await new Promise<void>((resolve) => open.close(() => resolve()));
    }
  });

  it('a subgraph that cannot be reached is unavailable at once', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const failures: unknown[] = [];
    const target = `http://127.0.0.1:${port}/graphql`;
    const data = new RemoteDataSource('rental', target, {
      timeoutMs: 60_000,
      signer,
      trust: new SubgraphTrust(new Map([['rental', target]])),
      onFailure: (error) => failures.push(error),
    });
    const answer = await data.process(operation());
    expect(answer).toMatchObject({ errors: [{ extensions: { code: 'UPSTREAM_UNAVAILABLE' } }] });
    expect(String(failures[0])).toMatch(/did not answer whether it refuses unsigned calls/);
    await data.close();
  });
});
