import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { checkSchema, type CheckReport, type RegisteredOperation } from '../gateway/governance/schema-check.js';
import type { UsageRow } from '../gateway/governance/usage.js';
import { composeSupergraph } from '../schema/compose.js';
import { readCheckedInSupergraph } from '../schema/supergraph-file.js';
import { subgraphs } from '../subgraphs/registry.js';

/*
 * npm run schema:check [-- --url http://127.0.0.1:4000 --key <ops:admin key>] [--documents DIR] [--json]
 *
 * Composes the working tree's SDLs and compares the result with the supergraph a running gateway serves
 * (--url; its field usage is consulted too), or with the one checked in at HEAD. Exit 1 when a breaking
 * change would break a client that used its coordinate, a trusted document (--documents, default
 * TRUSTED_DOCUMENTS_DIR) or a REST route; 2 when the working tree does not compose.
 */

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    key: { type: 'string' },
    documents: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

async function main(): Promise<number> {
  let proposed: string;
  try {
    proposed = composeSupergraph();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    return 2;
  }
  const key = values.key ?? process.env['OPS_API_KEY'];
  const url = values.url?.replace(/\/$/, '');
  const admin = async (path: string): Promise<Response> => fetch(`${url}${path}`, { headers: key ? { 'x-api-key': key } : {} });
  let served: string;
  if (url) {
    const res = await admin('/admin/supergraph');
    if (!res.ok) throw new Error(`${url}/admin/supergraph answered ${res.status}: ${await res.text()} (send an ops:admin key with --key or OPS_API_KEY)`);
    served = ((await res.json()) as { supergraph: string }).supergraph;
  } else {
    served = checkedInAtHead();
  }
  const report = await checkSchema({
    served,
    proposed,
    registered: [...restOperations(), ...trustedDocuments(values.documents ?? process.env['TRUSTED_DOCUMENTS_DIR'])],
    ...(url
      ? {
          usage: async (coordinate: string): Promise<UsageRow[]> => {
            const res = await admin(`/admin/usage?coordinate=${encodeURIComponent(coordinate)}`);
            if (res.status === 404) return [];
            if (!res.ok) throw new Error(`${url}/admin/usage answered ${res.status}: ${await res.text()}`);
            return ((await res.json()) as { clients: UsageRow[] }).clients;
          },
        }
      : {}),
  });
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else print(report, url ? `the supergraph ${url} serves` : 'the supergraph checked in at HEAD');
  return report.failed ? 1 : 0;
}

function checkedInAtHead(): string {
  try {
    return execFileSync('git', ['show', 'HEAD:schema/supergraph.graphql'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return readCheckedInSupergraph();
  }
}

function restOperations(): RegisteredOperation[] {
  return subgraphs.flatMap((m) => m.routes.map((r) => ({ client: 'rest', id: `${r.method} ${m.restPrefix}${r.path}`, name: null, body: r.operation })));
}

/** Every manifest of a trusted-documents folder (Apollo's format or Relay's), as registered operations. */
function trustedDocuments(dir: string | undefined): RegisteredOperation[] {
  if (!dir || !existsSync(dir)) return [];
  const operations: RegisteredOperation[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json') && f !== 'clients.json')) {
    const client = file.slice(0, -'.json'.length);
    const raw = JSON.parse(readFileSync(join(dir, file), 'utf8')) as unknown;
    if (typeof raw === 'object' && raw !== null && 'operations' in raw && Array.isArray(raw.operations)) {
      for (const op of raw.operations as Array<{ id: string; name?: string; body: string }>)
        operations.push({ client, id: op.id, name: op.name ?? null, body: op.body });
    } else if (typeof raw === 'object' && raw !== null) {
      for (const [id, body] of Object.entries(raw as Record<string, string>)) operations.push({ client, id, name: null, body });
    }
  }
  return operations;
}

function print(report: CheckReport, against: string): void {
  const breaking = report.changes.filter((c) => c.class === 'breaking');
  console.log(`schema check: the working tree against ${against}`);
  if (report.changes.length === 0) console.log('  no change to the API schema');
  for (const klass of ['breaking', 'dangerous', 'safe'] as const) {
    const changes = report.changes.filter((c) => c.class === klass);
    if (changes.length === 0) continue;
    console.log(`\n${klass} (${changes.length}):`);
    for (const change of changes) {
      console.log(`  - ${change.message}`);
      if (klass !== 'breaking') continue;
      for (const u of change.usedBy) {
        console.log(
          `      used by ${u.client ?? '(no client name)'}${u.version ? `@${u.version}` : ''} as ${u.tenant}/${u.principal}: ${u.operation || '(anonymous)'} x${u.requests}, last ${u.lastSeen}`,
        );
      }
      for (const r of change.registeredIn) console.log(`      registered in ${r.client === 'rest' ? 'REST route' : `client ${r.client}`} ${r.name ?? r.id}`);
      if (change.usedBy.length === 0 && change.registeredIn.length === 0)
        console.log(`      no recorded use${report.usageConsulted ? '' : ' (usage not consulted: pass --url)'} and no registered operation`);
    }
  }
  if (report.deprecated.length > 0) {
    console.log(`\ndeprecated (${report.deprecated.length}):`);
    for (const d of report.deprecated) {
      const users = d.usedBy.map((u) => `${u.client ?? '(no client name)'}: ${u.operation || '(anonymous)'} x${u.requests}`);
      console.log(
        `  - ${d.coordinate} (${d.reason}): ${report.usageConsulted ? (users.length > 0 ? users.join('; ') : 'no remaining users') : 'usage not consulted'}`,
      );
    }
  }
  const blocking = breaking.filter((c) => c.usedBy.length > 0 || c.registeredIn.length > 0).length;
  console.log(`\n${report.failed ? `FAILED: ${blocking} breaking change(s) would break a client, a trusted document or a REST route` : 'passed'}`);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(2);
  },
);
