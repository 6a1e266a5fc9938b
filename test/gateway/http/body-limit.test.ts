import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * A body over BODY_LIMIT_BYTES is refused before it is read. Every client must read the 413: the server
 * answers, half-closes and discards the rest of the body (a lingering close, gateway/http/linger.ts), where
 * destroying the socket at once made the kernel reset the connection and clients saw ECONNRESET instead.
 */

const run = promisify(execFile);
const SIZE = 5 * 1024 * 1024;
const ROUNDS = 15;
const PATHS = ['/graphql', '/rental/bookings'] as const;
const big = Buffer.alloc(SIZE, 0x20);

interface Answer {
  status: number;
  code: unknown;
  connection: string | undefined;
}

/**
 * Node's http client, the body given whole (Content-Length) or streamed in chunks (no length). Settles
 * when the connection has closed, with any error the client saw on the way: a graceful close shows none
 * (a reset shows ECONNRESET or EPIPE, before the answer was read or after).
 */
function nodeHttp(base: string, path: string, chunked: boolean): Promise<Answer & { errors: string[] }> {
  const url = new URL(path, base);
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (!chunked) headers['content-length'] = SIZE;
    const errors: string[] = [];
    let answer: Answer | null = null;
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code?: unknown };
        answer = { status: res.statusCode ?? 0, code: body.code, connection: res.headers.connection };
      });
      res.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    });
    req.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    req.on('socket', (socket) => socket.on('close', () => resolve({ ...(answer ?? { status: 0, code: null, connection: undefined }), errors })));
    if (chunked) {
      for (let at = 0; at < SIZE; at += 64 * 1024) req.write(big.subarray(at, at + 64 * 1024));
      req.end();
    } else req.end(big);
  });
}

async function viaFetch(base: string, path: string): Promise<Answer> {
  const res = await fetch(new URL(path, base), { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
  const body = (await res.json()) as { code?: unknown };
  return { status: res.status, code: body.code, connection: res.headers.get('connection') ?? undefined };
}

describe('a body over the limit is answered 413 to every client, never reset', () => {
  let server: TestServer;
  let dir: string;
  let file: string;
  beforeAll(async () => {
    server = await startTestServer();
    dir = await mkdtemp(join(tmpdir(), 'body-limit-'));
    file = join(dir, 'body.json');
    await writeFile(file, big);
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  for (const path of PATHS) {
    it(`Node http, ${ROUNDS} times with Content-Length and ${ROUNDS} chunked: POST ${path}`, async () => {
      for (let i = 0; i < ROUNDS; i++) {
        for (const chunked of [false, true]) {
          expect(await nodeHttp(server.url, path, chunked)).toEqual({ status: 413, code: 'PAYLOAD_TOO_LARGE', connection: 'close', errors: [] });
        }
      }
    });

    it(`fetch, ${ROUNDS} times: POST ${path}`, async () => {
      for (let i = 0; i < ROUNDS; i++) expect(await viaFetch(server.url, path)).toEqual({ status: 413, code: 'PAYLOAD_TOO_LARGE', connection: 'close' });
    });

    it(`curl, ${ROUNDS} times (with and without Expect: 100-continue): POST ${path}`, async () => {
      for (let i = 0; i < ROUNDS; i++) {
        for (const expectHeader of ['Expect: 100-continue', 'Expect:']) {
          const { stdout } = await run('curl', [
            '-sS',
            '-H',
            'content-type: application/json',
            '-H',
            expectHeader,
            '--data-binary',
            `@${file}`,
            '-w',
            '\n%{http_code}',
            `${server.url}${path}`,
          ]);
          const [body, status] = stdout.split('\n');
          expect(status).toBe('413');
          expect((JSON.parse(body!) as { code: unknown }).code).toBe('PAYLOAD_TOO_LARGE');
        }
      }
    });
  }

  it('the server keeps serving, and a body at the limit still passes', async () => {
    const res = await rest(server.url, 'POST', '/graphql', { query: '{ __typename }', padding: ' '.repeat(1024 * 1024 - 64) });
    expect(res.status).toBe(200);
    expect(res.body['data']).toEqual({ __typename: 'Query' });
  });
});
