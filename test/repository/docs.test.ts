import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The documentation as a map: README.md is the front door (short), docs/*.md hold the rest, and every
 * relative link between them (and to files of the repository) leads somewhere: the file exists and the
 * `#anchor` is a heading of it, as GitHub names headings. Moving a section cannot leave a link behind.
 */

const root = normalize(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');

/** The lines of a Markdown text outside fenced code blocks. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(text)) {
    const heading = /^#+ (.*)$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

const texts = new Map(DOCUMENTS.map((file) => [file, readFileSync(join(root, file), 'utf8')]));

/** The cells of a table row: split on `|` outside code spans, an escaped `\|` kept in its cell. */
function cellsOf(row: string): number {
  const plain = row
    .trim()
    .replace(/`[^`]*`/g, 'code')
    .replace(/\\\|/g, 'pipe');
  return plain.replace(/^\|/, '').replace(/\|$/, '').split('|').length;
}

const DELIMITER_ROW = /^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$/;

/** Each malformed table of a text: a delimiter row whose cells are not the header's, a row with more cells. */
function malformedTables(text: string): string[] {
  const lines = prose(text);
  const problems: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    if (!DELIMITER_ROW.test(lines[i]!)) continue;
    const header = cellsOf(lines[i - 1]!);
    const delimiter = cellsOf(lines[i]!);
    if (delimiter !== header) problems.push(`${lines[i - 1]!.slice(0, 60)}: ${header} header cells, ${delimiter} delimiter cells`);
    for (let j = i + 1; j < lines.length && lines[j]!.trim().startsWith('|'); j++) {
      const cells = cellsOf(lines[j]!);
      if (cells > header) problems.push(`${lines[j]!.slice(0, 60)}: ${cells} cells under ${header} headers`);
    }
  }
  return problems;
}

/** Every suite under test/, by folder: `gateway/http` -> [`admission`, ...]. */
function suitesByFolder(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, 'test', dir), { withFileTypes: true })) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.test.ts')) found.set(dir, [...(found.get(dir) ?? []), entry.name.slice(0, -'.test.ts'.length)]);
    }
  };
  walk('');
  return found;
}

/**
 * The suites docs/testing.md lists, by folder: under each `### \`test/<folder>/\`` heading, the names in code
 * before the first colon (or parenthesis) of each top-level bullet.
 */
function listedSuites(text: string): Map<string, string[]> {
  const listed = new Map<string, string[]>();
  let folder: string | undefined;
  for (const line of prose(text)) {
    const heading = /^#{1,3} (.*)$/.exec(line);
    if (heading) {
      folder = /^`test\/(.+)\/`$/.exec(heading[1]!.trim())?.[1];
      continue;
    }
    if (!folder || !line.startsWith('- ')) continue;
    const head = line.slice(2).split(':')[0]!.split('(')[0]!;
    listed.set(folder, [...(listed.get(folder) ?? []), ...[...head.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)]);
  }
  return listed;
}

describe('the documentation', () => {
  it('every table is well formed: as many delimiter cells as header cells, no row wider than its header', () => {
    const problems = DOCUMENTS.flatMap((file) => malformedTables(texts.get(file)!).map((p) => `${file}: ${p}`));
    expect(problems).toEqual([]);
  });

  it('docs/testing.md lists every suite under test/, in its folder, once, and nothing else', () => {
    const sorted = (m: Map<string, string[]>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, [...v].sort()]));
    const actual = suitesByFolder();
    expect(sorted(listedSuites(texts.get('docs/testing.md')!))).toEqual(sorted(actual));
    expect([...actual.values()].flat().length).toBeGreaterThan(90);
  });

  it('README.md is the front door: at most 250 lines', () => {
    expect(texts.get('README.md')!.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('every relative link leads to a file that exists and a heading it has', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const [file, text] of texts) {
      for (const line of prose(text)) {
        for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          if (/^[a-z][a-z+.-]*:/i.test(target!)) continue;
          const [path, anchor] = target!.split('#') as [string, string | undefined];
          const resolved = path === '' ? file : normalize(join(dirname(file), path));
          checked++;
          if (!existsSync(join(root, resolved))) {
            broken.push(`${file}: ${target} (no file ${resolved})`);
            continue;
          }
          if (anchor && resolved.endsWith('.md') && !anchorsOf(texts.get(resolved) ?? readFileSync(join(root, resolved), 'utf8')).has(anchor)) {
            broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
          }
        }
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(30);
  });
});
