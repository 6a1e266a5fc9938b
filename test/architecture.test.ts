import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The layers, read from the import statements of the source files: platform/ depends on nothing of the
 * project; a subgraph depends on platform/ and on its own folder only (subgraphs share code through
 * platform/, never through each other); the gateway reaches the subgraphs through subgraphs/registry.ts.
 */

const root = normalize(join(dirname(fileURLToPath(import.meta.url)), '..'));
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

/** What `file` may import, or a reason it may not import `target`. */
function violation(file: string, target: string): string | null {
  const [layer, second] = file.split('/');
  const [targetLayer, targetSecond] = target.split('/');
  if (targetLayer === 'tools' && layer !== 'tools') return 'nothing of the service imports tools/ (build tools above the layers)';
  if (targetLayer === layer && layer !== 'subgraphs') return null;
  switch (layer) {
    case 'platform':
      return 'platform/ imports nothing of the project outside platform/';
    case 'schema':
      return targetLayer === 'platform' ? null : 'schema/ imports platform/ only';
    case 'tools':
      // Code generation reads the schema and the subgraphs' route tables.
      return null;
    case 'gateway':
      if (targetLayer === 'platform' || targetLayer === 'schema') return null;
      return target === 'subgraphs/registry.ts' ? null : 'the gateway reaches subgraphs through subgraphs/registry.ts only';
    case 'subgraphs':
      if (targetLayer === 'platform') return null;
      if (file === 'subgraphs/registry.ts') return targetLayer === 'subgraphs' && target.endsWith('/index.ts') ? null : 'the registry imports each subgraph by its index.ts';
      if (targetLayer === 'subgraphs' && targetSecond === second) return null;
      return `subgraphs/${second} shares code with other subgraphs only through platform/`;
    default:
      return null;
  }
}

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
  });
});
