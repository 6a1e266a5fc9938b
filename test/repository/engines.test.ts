import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/*
 * Every package `npm ci` installs accepts the oldest Node the project says it runs on (package.json
 * `engines.node`): a release that asks for a newer Node is pinned below it, or held back by an override,
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

describe('the Node every package accepts', () => {
  const oldest = semver.minVersion(manifest.engines.node);

  it("is the project's oldest Node, for every package in the lockfile", () => {
    expect(oldest?.version).toBe('20.19.0');
    const refused: string[] = [];
    const unreadable: string[] = [];
    let declared = 0;
    for (const [path, p] of Object.entries(lock.packages)) {
      const range = path === '' ? null : nodeRange(p);
      if (range === null) continue;
      declared++;
      if (semver.validRange(range) === null) unreadable.push(`${path}@${p.version}: ${range}`);
      else if (!semver.satisfies(oldest!, range)) refused.push(`${path}@${p.version} asks for Node ${range}`);
    }
    expect(refused).toEqual([]);
    expect(unreadable).toEqual([]);
    // The lockfile does record engines: hundreds of packages declare one.
    expect(declared).toBeGreaterThan(100);
  });

  it('holds for the Node running these tests', () => {
    expect(semver.satisfies(process.version, manifest.engines.node)).toBe(true);
  });
});
