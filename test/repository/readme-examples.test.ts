import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../support/server.js';

/*
 * Every command-line example of the documentation, run as written against a fresh server: each `curl`
 * command of a fenced `sh` block in README.md and docs/*.md, with the documented host and port replaced by
 * the test server's. A command answers 2xx unless its line ends in a comment naming the status it
 * documents (`# 400 ...`); an incremental (multipart/mixed) answer is read part by part. The documentation cannot drift from the behaviour without this failing.
 */

const run = promisify(execFile);

/** The JSON payloads of a multipart/mixed answer (boundary `-`), in order. */
function multipartParts(text: string): Record<string, unknown>[] {
  return text
    .replace(/\r\n-----\r\n$/, '')
    .split('\r\n---\r\n')
    .filter((part) => part.trim() !== '')
    .map((part) => JSON.parse(part.slice(part.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>);
}
const root = new URL('../..', import.meta.url);
const DOCUMENTS = [
  'README.md',
  ...readdirSync(new URL('docs/', root))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
/** How the documentation names the server: `localhost:4000`, optionally with a scheme, or 127.0.0.1. */
const DOCUMENTED_HOST = /(?:https?:\/\/)?(?:localhost|127\.0\.0\.1):4000/g;

interface Example {
  where: string;
  command: string;
  /** The status a trailing `# NNN` comment documents; null: any 2xx. */
  expected: number | null;
}

/** The `curl` commands of a Markdown text's fenced sh blocks, backslash-continued lines joined. */
function curlExamples(file: string, text: string): Example[] {
  const examples: Example[] = [];
  let shell = false;
  let pending = '';
  let startLine = 0;
  text.split('\n').forEach((line, i) => {
    const fence = /^\s*```\s*(\S*)/.exec(line);
    if (fence) {
      shell = !shell && ['sh', 'bash', 'shell'].includes(fence[1]!);
      pending = '';
      return;
    }
    if (!shell) return;
    if (pending === '') startLine = i + 1;
    const continued = /\\\s*$/.test(line);
    pending += continued ? line.replace(/\\\s*$/, ' ') : line;
    if (continued) return;
    const command = pending.trim();
    pending = '';
    if (!command.startsWith('curl ')) return;
    const status = /\s#\s*(\d{3})\b[^'"]*$/.exec(command);
    examples.push({ where: `${file}:${startLine}`, command, expected: status ? Number(status[1]) : null });
  });
  return examples;
}

const examples = DOCUMENTS.flatMap((file) => curlExamples(file, readFileSync(new URL(file, root), 'utf8')));

describe('the command-line examples of the documentation run against a fresh server', () => {
  let base: string;
  let dir: string;
  beforeAll(async () => {
    const server = await startTestServer();
    base = server.url;
    dir = await mkdtemp(join(tmpdir(), 'readme-examples-'));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('finds the examples, and none of them names a fixed date (dates are relative to now)', () => {
    expect(examples.length).toBeGreaterThanOrEqual(8);
    expect(examples.some((e) => e.expected !== null)).toBe(true);
    for (const e of examples) expect(e.command, e.where).not.toMatch(/\d{4}-\d{2}-\d{2}T\d{2}/);
  });

  it.each(examples.map((e) => [e.where, e] as const))('%s', async (_where, example) => {
    const body = join(dir, `${example.where.replace(/[^\w]+/g, '_')}.json`);
    const command = example.command.replace(DOCUMENTED_HOST, base).replace(/^curl /, `curl -sS -o '${body}' -w '%{http_code}' `);
    const { stdout } = await run('bash', ['-c', command], { timeout: 60_000 });
    const status = Number(stdout.trim());
    const text = await readFile(body, 'utf8');
    // An incremental (@defer) answer is multipart/mixed: its parts are checked one by one.
    const parts = text.startsWith('\r\n---\r\n') ? multipartParts(text) : null;
    const answer = (parts ? parts[0] : JSON.parse(text)) as Record<string, unknown>;
    if (example.expected === null) {
      expect(status, `${example.command}\n${text}`).toBeGreaterThanOrEqual(200);
      expect(status, `${example.command}\n${text}`).toBeLessThan(300);
      // A GraphQL answer can be 200 with errors; a documented example has none.
      for (const part of parts ?? [answer]) {
        expect(part['errors'], text).toBeUndefined();
        for (const item of (part['incremental'] as Record<string, unknown>[] | undefined) ?? []) expect(item['errors'], text).toBeUndefined();
      }
      if (parts) {
        expect(parts.length, text).toBeGreaterThan(1);
        expect(parts.at(-1)!['hasNext'], text).toBe(false);
      }
    } else {
      expect(status, `${example.command}\n${text}`).toBe(example.expected);
      expect(answer['status']).toBe(example.expected);
    }
  });
});
