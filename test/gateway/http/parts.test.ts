import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import { createHttpApp } from '../../../gateway/http/app.js';
import { graphqlRoutePlugin } from '../../../gateway/graphql/route.js';
import { edgeGuardPlugin } from '../../../gateway/security/edge-guard.js';
import { httpConfig } from '../../../gateway/http/config.js';
import { startServer } from '../../../gateway/server.js';
import { ConfigError, sectionOf, type PlatformConfig } from '../../../platform/config.js';
import { LOCK_FILE } from '../../../platform/data-dir-lock.js';
import { startTestServer } from '../../support/server.js';

/*
 * The gateway and every subgraph server are assembled from named parts (fastify plugins, listed at the
 * root: gateway/server.ts, gateway/subgraph-host/server.ts). A part names the parts it needs, and takes its
 * configuration through its room's section: both are checked as it registers, not when a request finds out.
 */

/** The parts the gateway's root lists, in its order. */
const GATEWAY_PARTS = [
  'metrics',
  'admission',
  'warm-up',
  'subgraphs',
  'explorer',
  'edge-guard',
  'supergraph',
  'operation-metrics',
  'usage',
  'documents',
  'pipeline',
  'graphql-server',
  'http-streams',
  'graphql-route',
  'graphql-ws',
  'credential-recheck',
  'rest',
  'health',
  'dashboard',
];

describe('the parts', () => {
  it('the gateway is made of its named parts, each registered once', async () => {
    const server = await startTestServer();
    for (const part of GATEWAY_PARTS) expect(server.app.hasPlugin(part), part).toBe(true);
    expect(server.app.hasPlugin('no-such-part')).toBe(false);
    await server.close();
  });

  it('a part registered without a part it depends on stops the start, naming it', async () => {
    const app = createHttpApp(loadConfig({}));
    app.register(graphqlRoutePlugin, { config: loadConfig({}) });
    await expect(app.ready()).rejects.toThrow("The dependency 'graphql-server' of plugin 'graphql-route' is not registered");
    await app.close();
  });

  it('a part given a configuration without its section stops the start, naming the part and the variables', async () => {
    const app = createHttpApp(loadConfig({}));
    const partial = { API_KEYS: undefined } as unknown as PlatformConfig & Parameters<typeof edgeGuardPlugin>[1]['config'];
    app.register(edgeGuardPlugin, { config: partial });
    const error: unknown = await app.ready().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/edge-guard: its configuration has no .*AUTH_RECHECK_S.*platform.s section, platform\/config.ts/);
    await app.close();
  });

  it('a part that fails to start closes what the parts before it opened: the database and its data directory', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'ops-supergraph-parts-'));
    const documents = mkdtempSync(join(tmpdir(), 'ops-supergraph-parts-documents-'));
    writeFileSync(join(documents, 'broken.json'), '{ not json');
    try {
      const config = loadConfig({ PORT: '0', DATA_DIR: dataDir, TRUSTED_DOCUMENTS_DIR: documents, TRUSTED_DOCUMENTS: 'allow', LOG_LEVEL: 'silent' });
      await expect(startServer({ config })).rejects.toThrow(/TRUSTED_DOCUMENTS_DIR/);
      // The subgraphs' part had opened the database (holding the directory's lock); its onClose released it.
      expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(documents, { recursive: true, force: true });
    }
  });

  it("a part's section rules are checked with it, naming the part", () => {
    const config = { ...loadConfig({}), HTTP_HEADERS_TIMEOUT_MS: 5000, HTTP_REQUEST_TIMEOUT_MS: 1000 };
    expect(() => sectionOf(httpConfig, config, 'some-part')).toThrow(/some-part: HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS/);
    expect(sectionOf(httpConfig, loadConfig({}), 'some-part').HTTP_REQUEST_TIMEOUT_MS).toBe(30_000);
  });
});
