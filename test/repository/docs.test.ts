import { execFileSync } from 'node:child_process';
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

/** A number with a unit of measure: what counts as a measured figure in the performance documents. */
const FIGURE = /\d[\d,.]*\s*(ms|µs|us|s|ops\/s|rps|KiB|MiB|GiB|KB|MB|GB|x|%|events\/s|msgs\/s|rows\/s|deliveries\/s)(?![\w/])/;

/** The sections (headings `##` to `####`) of a text: each heading with the lines under it. */
function sectionsOf(text: string): { heading: string; lines: string[] }[] {
  const sections: { heading: string; lines: string[] }[] = [];
  for (const line of prose(text)) {
    if (/^#{2,4} /.test(line)) sections.push({ heading: line, lines: [] });
    else sections.at(-1)?.lines.push(line);
  }
  return sections;
}

/** Whether git can answer for this checkout's history: false in a shallow clone or outside git. */
const hasHistory = (() => {
  try {
    return execFileSync('git', ['rev-parse', '--is-shallow-repository'], { cwd: root, encoding: 'utf8' }).trim() === 'false';
  } catch {
    return false;
  }
})();

/** Commits asked about, and git's answer. */
const commits = new Map<string, boolean>();

/** Whether `hash` names a commit of this repository; undefined when there is no history to ask (a shallow or no clone). */
function isCommit(hash: string): boolean | undefined {
  if (!hasHistory) return undefined;
  let known = commits.get(hash);
  if (known === undefined) {
    try {
      execFileSync('git', ['cat-file', '-e', `${hash}^{commit}`], { cwd: root, stdio: 'ignore' });
      known = true;
    } catch {
      known = false;
    }
    commits.set(hash, known);
  }
  return known;
}

/**
 * What is wrong with the sources of a performance document: a section with figures and no `Source:` line, a
 * source that names neither a benchmark of bench/ nor a one-off measurement, or no tree (unless it is a
 * benchmark's method, whose numbers are its parameters), or a tree that is not a commit of this repository.
 */
function unsourced(text: string): string[] {
  const problems: string[] = [];
  for (const { heading, lines } of sectionsOf(text)) {
    const sources = lines.filter((line) => line.startsWith('Source: '));
    // One line each, so that what it names is read whole.
    lines.forEach((line, i) => {
      if (line.startsWith('Source: ') && (lines[i + 1] ?? '').trim() !== '') problems.push(`${heading}: a Source: line goes on over the next line`);
    });
    const measured = (line: string) => FIGURE.test(line) || (/^\s*\|/.test(line) && !/^\s*\|[\s|:-]*$/.test(line) && /\d/.test(line));
    const figures = lines.filter((line) => !line.startsWith('Source: ') && measured(line));
    if (figures.length > 0 && sources.length === 0) problems.push(`${heading}: figures (${figures[0]!.trim().slice(0, 50)}...) and no Source: line`);
    for (const source of sources) {
      const benches = [...source.matchAll(/`npm run bench -- ([a-z][a-z0-9-]*)/g)].map((m) => m[1]!);
      const missing = benches.filter((name) => !existsSync(join(root, 'bench', `${name}.ts`)));
      if (missing.length > 0) problems.push(`${heading}: no benchmark ${missing.join(', ')} in bench/`);
      if (benches.length === 0 && !source.includes('**one-off**'))
        problems.push(`${heading}: its source names no \`npm run bench -- <name>\` and is not marked **one-off**`);
      const trees = [...source.matchAll(/trees? [^;]*?`([0-9a-f]{7,40})`(?:(?:,| and| beside| to) `([0-9a-f]{7,40})`)*/g)].length;
      const hashes = [...source.matchAll(/`<?([0-9a-f]{7,40})>?`/g)].map((m) => m[1]!);
      // A section that describes a benchmark's method names its parameters (95% reads, 1000 ms) and no result.
      if (trees === 0 && !source.includes('(the method')) problems.push(`${heading}: its source names no tree`);
      for (const hash of hashes) if (isCommit(hash) === false) problems.push(`${heading}: ${hash} is not a commit of this repository`);
    }
  }
  return problems;
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

  it('every section of docs/performance.md and docs/scaling.md with figures names its source: a benchmark and the tree it ran on, or a one-off', () => {
    for (const file of ['docs/performance.md', 'docs/scaling.md']) expect(unsourced(texts.get(file)!), file).toEqual([]);
    // The check finds what it is for.
    expect(unsourced('## A\n\nIt took 12 ms.\n')).toEqual(['## A: figures (It took 12 ms....) and no Source: line']);
    expect(unsourced('## A\n\n12 ms.\n\nSource: a script, tree `0000000`.\n')).toContain(
      '## A: its source names no `npm run bench -- <name>` and is not marked **one-off**',
    );
    expect(unsourced('## A\n\n12 ms.\n\nSource: `npm run bench -- nothing-here`.\n')).toEqual([
      '## A: no benchmark nothing-here in bench/',
      '## A: its source names no tree',
    ]);
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
