import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiSchemaOf, checkSchema, type RegisteredOperation } from '../../../gateway/governance/schema-check.js';
import { SqlUsageStore, UsageRecorder, USAGE_MIGRATIONS } from '../../../gateway/governance/usage.js';
import { openDatabase, type Database } from '../../../platform/db.js';
import { migrate } from '../../../platform/migrate.js';
import { readSubgraphSdl } from '../../../platform/subgraph.js';
import { composeSubgraphs } from '../../../schema/compose.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { subgraphNames, type SubgraphName } from '../../../schema/subgraphs.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { startTestServer } from '../../support/server.js';

/*
 * A schema change checked before it lands: removing a field a client used fails, removing an unused one
 * passes, changing a field a REST route or a trusted document names is caught, and deprecated fields show
 * who still uses them.
 */

const served = readCheckedInSupergraph();
const servedSchema = apiSchemaOf(served);
const DEPOTS_FIELD = /\n\s*depots: \[Depot!\]![^\n]*\n/;

/** The supergraph with one subgraph's SDL changed. */
function composedWith(name: SubgraphName, change: (sdl: string) => string): string {
  return composeSubgraphs(
    subgraphNames.map((n) => {
      const sdl = readSubgraphSdl(n);
      const changed = n === name ? change(sdl) : sdl;
      if (n === name) expect(changed, 'the change applies').not.toBe(sdl);
      return { name: n, sdl: changed };
    }),
  );
}

const rest: RegisteredOperation[] = subgraphs.flatMap((m) =>
  m.routes.map((r) => ({ client: 'rest', id: `${r.method} ${m.restPrefix}${r.path}`, name: null, body: r.operation })),
);

describe('schema checks', () => {
  let db: Database;
  let usage: UsageRecorder;
  beforeAll(async () => {
    db = await openDatabase({});
    await migrate(db, [USAGE_MIGRATIONS]);
    usage = new UsageRecorder({
      store: new SqlUsageStore(db),
      schema: () => servedSchema,
      bucketMs: 3_600_000,
      retentionMs: 30 * 86_400_000,
      maxOperations: 1000,
    });
  });
  afterAll(() => db.close());
  const since = new Date(Date.now() - 86_400_000);

  it('removing a field nobody used or registered is breaking, and passes', async () => {
    const report = await checkSchema({
      served,
      proposed: composedWith('rental', (s) => s.replace(DEPOTS_FIELD, '\n')),
      registered: rest,
      usage: (c) => usage.usage(c, since),
    });
    const removed = report.changes.find((c) => c.coordinate === 'Query.depots');
    expect(removed).toMatchObject({ class: 'breaking', usedBy: [], registeredIn: [] });
    expect(removed!.message).toContain('depots');
    expect(report.failed).toBe(false);
  });

  it('removing a field a client used fails, naming the client and operation', async () => {
    const text = 'query DepotList { depots { id name } }';
    const principal = { id: 'partner', tenant: 'tenant-p', scopes: [] };
    for (let i = 0; i < 3; i++) usage.record({ name: 'web-app', version: '2.0.0', principal }, text, parse(text), null);
    const report = await checkSchema({
      served,
      proposed: composedWith('rental', (s) => s.replace(DEPOTS_FIELD, '\n')),
      registered: rest,
      usage: (c) => usage.usage(c, since),
    });
    expect(report.failed).toBe(true);
    const removed = report.changes.find((c) => c.coordinate === 'Query.depots')!;
    expect(removed.usedBy).toEqual([
      expect.objectContaining({ client: 'web-app', version: '2.0.0', principal: 'partner', operation: 'DepotList', requests: 3 }),
    ]);
  });

  it('changing a field a REST route or a trusted document names is caught, without any usage', async () => {
    const proposed = composedWith('bonding', (s) => s.replace(/\n\s*tickMs: Int![^\n]*\n/, '\n'));
    const document: RegisteredOperation = { client: 'ops-console', id: 'abc123', name: 'Tick', body: 'query Tick { bondingOverview { tickMs } }' };
    const report = await checkSchema({ served, proposed, registered: [...rest, document] });
    expect(report.failed).toBe(true);
    expect(report.usageConsulted).toBe(false);
    const removed = report.changes.find((c) => c.coordinate === 'BondingOverview.tickMs')!;
    expect(removed.class).toBe('breaking');
    expect(removed.registeredIn).toEqual(
      expect.arrayContaining([expect.objectContaining({ client: 'rest', id: 'GET /bonding/health' }), { client: 'ops-console', id: 'abc123', name: 'Tick' }]),
    );
  });

  it('adding a field is safe, and a deprecated field shows its remaining users', async () => {
    const proposed = composedWith('rental', (s) => s.replace(/(\n\s*depots: \[Depot!\]!)/, '$1 @deprecated(reason: "read machines { depot }")'));
    const report = await checkSchema({ served, proposed, registered: rest, usage: (c) => usage.usage(c, since) });
    expect(report.failed).toBe(false);
    expect(report.changes.every((c) => c.class !== 'breaking')).toBe(true);
    expect(report.deprecated).toEqual([
      { coordinate: 'Query.depots', reason: 'read machines { depot }', usedBy: [expect.objectContaining({ client: 'web-app', operation: 'DepotList' })] },
    ]);
  });

  it('an SDL that does not compose is refused, naming the error', () => {
    expect(() => composedWith('rental', (s) => s.replace('type Query {', 'type Query {\n  broken: NoSuchType @requiresScopes(scopes: [[]])'))).toThrow(
      /NoSuchType/,
    );
  });

  it('npm run schema:check against a running gateway: the served supergraph and its usage, exit 0 when nothing changed', async () => {
    const KEY = 'schema-check-operator-1';
    const server = await startTestServer({ env: { API_KEYS: KEY } });
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'tools/schema-check.ts', '--url', server.url, '--key', KEY, '--json'], {
      cwd: new URL('../../..', import.meta.url).pathname,
    });
    const report = JSON.parse(stdout) as { changes: unknown[]; failed: boolean; usageConsulted: boolean };
    expect(report).toMatchObject({ changes: [], failed: false, usageConsulted: true });
    await server.close();
  });
});
