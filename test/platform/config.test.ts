import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAuthenticator } from '../../gateway/security/auth.js';
import { ConfigError } from '../../platform/config.js';
import { CONFIG_SECTIONS, loadConfig } from '../../gateway/config.js';
import { httpConfig } from '../../gateway/http/config.js';
import { configSection, parseConfig, sliceOf } from '../../platform/config.js';
import { systemClock } from '../../platform/clock.js';
import { startSubgraphRuntime } from '../../platform/runtime.js';
import { subgraphs } from '../../subgraphs/registry.js';
import { CONFIGURATION_DOC, SUBGRAPH_CONFIGURATION_DOCS, withConfigurationTable, withSubgraphConfigurationTable } from '../../tools/config-table.js';
import { readdirSync, readFileSync } from 'node:fs';

describe('configuration', () => {
  it('has documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      PORT: 4000,
      HOST: '127.0.0.1',
      DATA_DIR: './data',
      QUOTE_TTL_SECONDS: 120,
      API_KEYS: [],
      LOG_LEVEL: 'info',
    });
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('demo mode is chosen, not fallen into: beyond loopback without a credential the start stops, naming the choices', () => {
    expect(() => loadConfig({ HOST: '0.0.0.0' })).toThrow(
      /HOST: 0\.0\.0\.0 is not loopback and no credential is configured.*API_KEYS.*HOST=127\.0\.0\.1.*DEMO_MODE_BEYOND_LOOPBACK=true/,
    );
    expect(loadConfig({ HOST: '0.0.0.0', DEMO_MODE_BEYOND_LOOPBACK: 'true' }).HOST).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '0.0.0.0', API_KEYS: 'operator-key-00000001' }).HOST).toBe('0.0.0.0');
    for (const host of ['127.0.0.1', 'localhost', '::1']) expect(loadConfig({ HOST: host }).HOST).toBe(host);
  });

  it('parses keys and numbers', () => {
    const config = loadConfig({ PORT: '8080', API_KEYS: ' alpha-key-1 , beta-key-22 ,', QUOTE_TTL_SECONDS: '90' });
    expect(config.PORT).toBe(8080);
    expect(config.API_KEYS).toEqual(['alpha-key-1', 'beta-key-22']);
    expect(config.QUOTE_TTL_SECONDS).toBe(90);
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ QUOTE_TTL_SECONDS: '0' }, 'QUOTE_TTL_SECONDS'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ API_KEYS: 'short' }, 'API_KEYS'],
  ])('rejects %o, naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(name));
  });

  it('API_KEYS_FILE and the JWT settings: a bad file or half a JWT setup stops the start, naming what is wrong', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keys-'));
    try {
      const file = (name: string, content: string) => {
        const path = join(dir, name);
        writeFileSync(path, content);
        return path;
      };
      const problems = (path: string) => {
        try {
          createAuthenticator(loadConfig({ API_KEYS_FILE: path }));
        } catch (error) {
          expect(error).toBeInstanceOf(ConfigError);
          return (error as ConfigError).problems.join('\n');
        }
        throw new Error('no ConfigError');
      };
      expect(problems(join(dir, 'missing.json'))).toContain('cannot read');
      expect(problems(file('not-json.json', '{'))).toContain('as JSON');
      expect(problems(file('scope.json', JSON.stringify([{ key: 'k'.repeat(20), principal: 'p', tenant: 't', scopes: ['rental:everything'] }])))).toMatch(
        /entry 0\.scopes\.0: each scope must be one of ops:admin/,
      );
      expect(
        problems(file('both.json', JSON.stringify([{ key: 'k'.repeat(20), key_sha256: 'a'.repeat(64), principal: 'p', tenant: 't', scopes: ['fleet:read'] }]))),
      ).toContain('exactly one of key and key_sha256');
      expect(problems(file('short.json', JSON.stringify([{ key: 'short', principal: 'p', tenant: 't', scopes: ['fleet:read'] }])))).toContain(
        'at least 16 characters',
      );
      const twice = { key: 'k'.repeat(20), principal: 'p', tenant: 't', scopes: ['fleet:read'] };
      expect(problems(file('twice.json', JSON.stringify([twice, { ...twice, principal: 'q' }])))).toContain('entry 1 repeats a key');
      const ok = createAuthenticator(loadConfig({ API_KEYS_FILE: file('ok.json', JSON.stringify([twice])) }));
      expect(ok.enabled).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => loadConfig({ AUTH_JWKS_URL: 'https://idp.test/jwks' })).toThrow(/set all three/);
    expect(() => loadConfig({ PRINCIPAL_SECRET: 'short' })).toThrow(/at least 32 characters/);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com, http://127.0.0.1:5173' }).CORS_ORIGINS).toEqual([
      'https://app.example.com',
      'http://127.0.0.1:5173',
    ]);
    expect(() => loadConfig({ CORS_ORIGINS: 'https://app.example.com/' })).toThrow(/exact origin/);
    expect(() => loadConfig({ CORS_ORIGINS: '*' })).toThrow(/exact origin/);
  });

  it('is declared by the modules that read it: each variable once, documented, and the table of docs/operations.md generated from the declarations', () => {
    const owners = CONFIG_SECTIONS.map((section) => section.owner);
    expect(owners).toEqual([
      'platform',
      'gateway/http',
      'gateway/security',
      'gateway/sources',
      'gateway/graphql',
      'gateway/subscriptions',
      'gateway/governance',
      'gateway/agents',
      'gateway/dashboard',
      'rental',
      'prediction',
      'bonding',
      'features',
      'optimization',
    ]);
    const names = CONFIG_SECTIONS.flatMap((section) => Object.keys(section.shape));
    expect(new Set(names).size).toBe(names.length);
    expect(names.length).toBe(100);
    for (const section of CONFIG_SECTIONS) for (const [name, schema] of Object.entries(section.shape)) expect(schema.description, name).toBeTruthy();
    expect(readFileSync(CONFIGURATION_DOC, 'utf8')).toBe(withConfigurationTable(readFileSync(CONFIGURATION_DOC, 'utf8')));
    expect(SUBGRAPH_CONFIGURATION_DOCS.map((d) => d.owner)).toEqual(['rental', 'bonding', 'features', 'optimization']);
    for (const { owner, doc } of SUBGRAPH_CONFIGURATION_DOCS)
      expect(readFileSync(doc, 'utf8'), owner).toBe(withSubgraphConfigurationTable(readFileSync(doc, 'utf8'), owner));
    // A variable declared twice is a programming error, found at the first start.
    const twice = configSection('twice', 'test', { PORT: httpConfig.shape.PORT });
    expect(() => parseConfig([...CONFIG_SECTIONS, twice], {}, {})).toThrow(/PORT is declared by both gateway\/http and twice/);
  });

  it('no document shows a variable in a table of its own making: every row naming one is in a generated section', () => {
    const declared = new Set(CONFIG_SECTIONS.flatMap((section) => Object.keys(section.shape)));
    const root = join(import.meta.dirname, '..', '..');
    const documents = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const handMade: string[] = [];
    let generatedRows = 0;
    for (const file of documents) {
      let generated = false;
      for (const line of readFileSync(join(root, file), 'utf8').split('\n')) {
        if (/^<!-- (configuration table|configuration of \w+): generated by npm run docs/.test(line)) generated = true;
        else if (/^<!-- end of configuration /.test(line)) generated = false;
        const variable = /^\| `([A-Z][A-Z0-9_]*)` \|/.exec(line)?.[1];
        if (!variable || !declared.has(variable)) continue;
        if (generated) generatedRows++;
        else handMade.push(`${file}: ${line.slice(0, 80)}`);
      }
    }
    expect(handMade).toEqual([]);
    expect(generatedRows).toBe(declared.size + 4 + 4 + 6 + 8);
  });

  it('hands each subgraph its own slice of the configuration, nothing else', async () => {
    const config = loadConfig({ DATA_DIR: ':memory:', FEATURES_DATA_DIR: ':memory:', FEATURES_POLICIES: '40', QUOTE_TTL_SECONDS: '77' });
    expect(sliceOf(subgraphs.find((m) => m.name === 'rental')!.config, config)).toEqual({
      QUOTE_TTL_SECONDS: 77,
      QUOTE_SWEEP_INTERVAL_MS: 1000,
      TRACKING_TICK_MS: 2000,
      QUOTE_SIGNING_KEY: undefined,
    });
    const seen = new Map<string, string[]>();
    const watched = subgraphs.map((module) => ({
      ...module,
      start: (deps: Parameters<typeof module.start>[0]) => {
        seen.set(module.name, Object.keys(deps.config).sort());
        return module.start(deps);
      },
    }));
    const runtime = await startSubgraphRuntime({ config, clock: systemClock, modules: watched });
    try {
      for (const module of subgraphs) expect(seen.get(module.name), module.name).toEqual(Object.keys(module.config.shape).sort());
      expect(seen.get('prediction')).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
