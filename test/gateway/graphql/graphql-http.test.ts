import { serverAudits } from 'graphql-http';
import { beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../../support/server.js';

describe('GraphQL over HTTP spec audits (graphql-http)', async () => {
  let url = '';
  beforeAll(async () => {
    url = (await startTestServer()).url;
  });
  const audits = serverAudits({ url: () => `${url}/graphql`, fetchFn: fetch });
  for (const audit of audits.filter((a) => a.name.startsWith('MUST'))) {
    it(audit.name, async () => {
      const result = await audit.fn();
      expect(result.status, 'reason' in result ? result.reason : '').toBe('ok');
    });
  }
});
