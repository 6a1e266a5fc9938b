import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { nodeInRange } from '../../tools/node-range.mjs';

/*
 * Every package `npm ci` installs accepts each Node line the project says it runs on, from its floor
 * (package.json `engines.node`: 20.19, 22.13 and 24, the line it is built and tested on): a release that asks for a newer Node is pinned below it, or held back by an override,
 * here rather than found later as a warning in an install log. The lockfile records each package's own
 * `engines`, so this holds for the packages of packages too.
 */

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface LockedPackage {
  version?: string;
  engines?: unknown;
}

const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockedPackage> };

/** The Node range a locked package declares, when it declares one. */
function nodeRange(p: LockedPackage): string | null {
  const engines = p.engines;
  if (typeof engines !== 'object' || engines === null || Array.isArray(engines)) return null;
  const node = (engines as Record<string, unknown>)['node'];
  return typeof node === 'string' ? node : null;
}

/** The lowest version of each line the range names (`^20.19.0 || ^22.13.0 || >=24`: 20.19.0, 22.13.0, 24.0.0). */
const floors = manifest.engines.node.split('||').map((part) => semver.minVersion(part.trim())!.version);

describe('the Node every package accepts', () => {
  it("is each of the project's Node lines from its floor, for every package in the lockfile (20.19, 22.13 and 24)", () => {
    expect(floors).toEqual(['20.19.0', '22.13.0', '24.0.0']);
    const refused: string[] = [];
    const unreadable: string[] = [];
    let declared = 0;
    for (const [path, p] of Object.entries(lock.packages)) {
      const range = path === '' ? null : nodeRange(p);
      if (range === null) continue;
      declared++;
      if (semver.validRange(range) === null) unreadable.push(`${path}@${p.version}: ${range}`);
      else for (const floor of floors) if (!semver.satisfies(floor, range)) refused.push(`${path}@${p.version} asks for Node ${range}, refusing ${floor}`);
    }
    expect(refused).toEqual([]);
    expect(unreadable).toEqual([]);
    // The lockfile does record engines: hundreds of packages declare one.
    expect(declared).toBeGreaterThan(100);
    // And its root records the project's own.
    expect(nodeRange(lock.packages['']!)).toBe(manifest.engines.node);
  });

  it('holds for the Node running these tests', () => {
    expect(semver.satisfies(process.version, manifest.engines.node)).toBe(true);
  });

  it("`npm start`'s check reads the range as semver does: a Node outside it stops the start with what to do", () => {
    for (const version of ['16.20.2', '18.20.4', '20.18.3', '20.19.0', '21.7.3', '22.12.0', '22.13.0', '23.11.0', '24.0.0', '24.22.3', '26.1.0']) {
      expect(nodeInRange(version, manifest.engines.node), version).toBe(semver.satisfies(version, manifest.engines.node));
    }
    expect(nodeInRange('18.20.4', manifest.engines.node)).toBe(false);
    expect(nodeInRange('24.22.3', manifest.engines.node)).toBe(true);
    // npm refuses such a Node at `npm ci` too.
    expect(readFileSync(join(root, '.npmrc'), 'utf8')).toMatch(/^engine-strict=true$/m);
  });
});

describe('install scripts', () => {
  const allowScripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> }).allowScripts ?? {};
  const architecture = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
  const scripted = Object.entries(lock.packages as Record<string, LockedPackage & { hasInstallScript?: boolean }>)
    .filter(([, p]) => p.hasInstallScript === true)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));

  it('every package with one is reviewed: named in package.json allowScripts and, with its reason, in docs/architecture.md', () => {
    expect(scripted.length).toBeGreaterThan(0);
    const unreviewed = [...new Set(scripted)].filter((name) => !(name in allowScripts) || !architecture.includes(`\`${name}\``));
    expect(unreviewed).toEqual([]);
    // None runs: every entry is a denial.
    expect(Object.entries(allowScripts).filter(([, allowed]) => allowed !== false)).toEqual([]);
    // And no entry outlives its package.
    expect(Object.keys(allowScripts).filter((name) => !scripted.includes(name))).toEqual([]);
  });
});
