import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../platform/config.js';

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
});
