import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../platform/db.js';
import { migrate } from '../../platform/migrate.js';
import { subgraphs } from '../../subgraphs/registry.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A PGlite data directory with every migration applied; test servers start on copies of it. */
    pgliteTemplate: string;
  }
}

/**
 * Creating a PGlite database (its initdb) is most of a test server's start: seconds on an idle machine,
 * tens of seconds on a loaded one. It is done once per run here, with every migration applied as the
 * runtime applies them; each test server then opens a copy of its own (test/support/server.ts).
 */
export default async function setup(project: TestProject): Promise<() => void> {
  const root = mkdtempSync(join(tmpdir(), 'ops-supergraph-test-'));
  const template = join(root, 'template');
  const db = await openDatabase({ dataDir: template });
  try {
    const platform = { owner: 'platform', dir: fileURLToPath(new URL('../../platform/migrations/', import.meta.url)) };
    await migrate(db, [platform, ...subgraphs.flatMap((m) => m.migrations)]);
  } finally {
    await db.close();
  }
  project.provide('pgliteTemplate', template);
  return () => rmSync(root, { recursive: true, force: true });
}
