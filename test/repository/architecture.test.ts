import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { GATEWAY_ENTRY_POINTS, GATEWAY_ROOMS, importViolation, LAYOUT_DOCS, withLayout } from '../../tools/layout.js';

/*
 * The layers, read from the import statements of every source file and judged by the rules the linter holds
 * as imports are written (tools/layout-rules.mjs, `importViolation`): platform/ depends on nothing of the
 * project; a subgraph depends on platform/ and on its own folder only, its resolvers never on its store;
 * the gateway reaches the subgraphs through subgraphs/registry.ts (and their settings through
 * subgraphs/config.ts); inside gateway/, each room imports the rooms it lists; only the entry points sit
 * at its top.
 */

const root = normalize(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));
const LAYERS = ['platform', 'gateway', 'subgraphs', 'schema', 'tools'] as const;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(path);
    return /\.(ts|mts|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The project files a source file imports (relative specifiers resolved; packages left out). */
function projectImports(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const out: string[] = [];
  for (const match of text.matchAll(IMPORT)) {
    const spec = match[1] ?? match[2]!;
    if (!spec.startsWith('.')) continue;
    out.push(relative(root, join(root, dirname(file), spec)).replace(/\.js$/, '.ts'));
  }
  return out;
}

const violation = importViolation;

describe('the layers', () => {
  const files = LAYERS.flatMap((layer) => sourceFiles(layer));

  it('finds the source files it judges', () => {
    expect(files.length).toBeGreaterThan(100);
    for (const layer of LAYERS) expect(files.some((f) => f.startsWith(`${layer}/`))).toBe(true);
    // The pattern sees the forms the code uses: named, type-only, re-exports and dynamic imports.
    expect(projectImports('gateway/subgraph-main.ts')).toContain('subgraphs/registry.ts');
  });

  it('no import runs against them: platform alone, each subgraph on platform, the gateway through the registry', () => {
    const problems = files.flatMap((file) =>
      projectImports(file).flatMap((target) => {
        const why = violation(file, target);
        return why ? [`${file} -> ${target}: ${why}`] : [];
      }),
    );
    expect(problems).toEqual([]);
  });

  it('gateway/ is rooms: every file in a known room or an entry point, and the rooms import one another without a loop', () => {
    const gateway = files.filter((f) => f.startsWith('gateway/'));
    const stray = gateway.filter((f) => (f.split('/').length === 2 ? !(f in GATEWAY_ENTRY_POINTS) : !(f.split('/')[1]! in GATEWAY_ROOMS)));
    expect(stray).toEqual([]);
    for (const room of Object.keys(GATEWAY_ROOMS))
      expect(
        gateway.some((f) => f.startsWith(`gateway/${room}/`)),
        room,
      ).toBe(true);
    // The allowed imports form no loop: a room never reaches itself through others.
    const reaches = (from: string, seen = new Set<string>()): Set<string> => {
      for (const next of GATEWAY_ROOMS[from]?.imports ?? []) {
        if (seen.has(next)) continue;
        seen.add(next);
        reaches(next, seen);
      }
      return seen;
    };
    expect(Object.keys(GATEWAY_ROOMS).filter((room) => reaches(room).has(room))).toEqual([]);
  });

  it('README.md and docs/architecture.md draw the layout from tools/layout.ts (npm run docs)', () => {
    for (const doc of LAYOUT_DOCS) expect(readFileSync(doc, 'utf8')).toBe(withLayout(readFileSync(doc, 'utf8')));
  });

  it('the configuration loads no GraphQL library: a process settles NODE_ENV (productionModeUnlessSet) before graphql-js is loaded', () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const target of projectImports(file)) visit(target);
    };
    visit('gateway/config.ts');
    const loadsGraphql = [...seen].filter((file) => /from\s*['"](graphql|@apollo\/[^'"]+)['"]/.test(readFileSync(join(root, file), 'utf8')));
    expect(loadsGraphql).toEqual([]);
    expect(seen.has('subgraphs/config.ts')).toBe(true);
  });

  it('platform/ has no import loop: no two of its files import each other, type-only imports included', () => {
    const platform = files.filter((f) => f.startsWith('platform/'));
    const imports = new Map(platform.map((f) => [f, new Set(projectImports(f))]));
    const loops = platform.flatMap((a) => [...imports.get(a)!].filter((b) => b > a && imports.get(b)?.has(a)).map((b) => `${a} <-> ${b}`));
    expect(loops).toEqual([]);
  });

  it('would catch a subgraph importing another', () => {
    expect(violation('subgraphs/features/generator.ts', 'subgraphs/prediction/random.ts')).toMatch(/only through platform/);
    expect(violation('platform/db.ts', 'gateway/server.ts')).toMatch(/imports nothing/);
    expect(violation('gateway/server.ts', 'subgraphs/rental/store.ts')).toMatch(/registry/);
    expect(violation('subgraphs/rental/store.ts', 'subgraphs/rental/tracking.ts')).toBeNull();
    expect(violation('gateway/planner/plan-executor.ts', 'gateway/security/authorization.ts')).toMatch(/may import observability, not gateway\/security/);
    expect(violation('subgraphs/rental/resolvers.ts', 'subgraphs/rental/store.ts')).toMatch(/only through the service/);
    expect(violation('subgraphs/rental/service.ts', 'subgraphs/rental/store.ts')).toBeNull();
    expect(violation('gateway/http/app.ts', 'gateway/server.ts')).toMatch(/entry point/);
    expect(violation('gateway/server.ts', 'gateway/http/app.ts')).toBeNull();
  });
});
