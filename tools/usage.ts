import { parseArgs } from 'node:util';
import type { UsageRow } from '../gateway/governance/usage.js';

/*
 * npm run usage -- <Type.field> [--since <ISO time>] [--url http://127.0.0.1:4000] [--key <ops:admin key>] [--json]
 *
 * Who used a schema coordinate: each client (name, version, principal) and operation, with its requests and
 * when it was last seen, from a running gateway's GET /admin/usage. The key comes from --key or OPS_API_KEY.
 */

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    since: { type: 'string' },
    url: { type: 'string', default: 'http://127.0.0.1:4000' },
    key: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

async function main(): Promise<number> {
  const coordinate = positionals[0];
  if (!coordinate) {
    console.error('usage: npm run usage -- <Type.field> [--since <ISO time>] [--url http://127.0.0.1:4000] [--key <ops:admin key>] [--json]');
    return 2;
  }
  const key = values.key ?? process.env['OPS_API_KEY'];
  const search = new URLSearchParams({ coordinate, ...(values.since ? { since: values.since } : {}) });
  const res = await fetch(`${values.url.replace(/\/$/, '')}/admin/usage?${search.toString()}`, { headers: key ? { 'x-api-key': key } : {} });
  const body = (await res.json()) as { detail?: string; coordinate: string; since: string; deprecated: string | null; requests: number; clients: UsageRow[] };
  if (!res.ok) {
    console.error(`${res.status}: ${body.detail ?? JSON.stringify(body)}`);
    return 1;
  }
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return 0;
  }
  console.log(`${body.coordinate}${body.deprecated ? ` (deprecated: ${body.deprecated})` : ''}: ${body.requests} requests since ${body.since}`);
  if (body.clients.length > 0) {
    console.table(
      body.clients.map((c) => ({
        client: c.client ?? '(no client name)',
        version: c.version ?? '',
        principal: `${c.tenant}/${c.principal}`,
        operation: c.operation || '(anonymous)',
        requests: c.requests,
        'last seen': c.lastSeen,
      })),
    );
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(2);
  },
);
