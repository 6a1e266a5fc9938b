import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { platformConfig, sectionOf, type PlatformConfig } from '../../platform/config.js';

/**
 * The `credential-recheck` part: every open WebSocket and HTTP stream has its credential checked again
 * every AUTH_RECHECK_S (and after a keys file reload, `app.recheckCredentials`): a key removed, a token
 * whose signing key left the JWKS, ends them.
 */
export const credentialRecheckPlugin = fp(
  async (app: FastifyInstance, options: { config: PlatformConfig }) => {
    const config = sectionOf(platformConfig, options.config, 'credential-recheck');
    const { auth, graphqlWs, httpStreams } = app;
    const recheck = async (): Promise<number> => {
      if (!auth.enabled) return 0;
      const [sockets, streamed] = await Promise.all([graphqlWs.recheck(), httpStreams.recheck(auth)]);
      return sockets + streamed;
    };
    const timer = setInterval(() => {
      recheck().catch((error: unknown) => app.log.warn({ err: error }, 'credential recheck failed'));
    }, config.AUTH_RECHECK_S * 1000);
    timer.unref();
    app.addHook('preClose', async () => clearInterval(timer));
    app.decorate('recheckCredentials', recheck);
  },
  { name: 'credential-recheck', fastify: '5.x', dependencies: ['edge-guard', 'graphql-ws', 'http-streams'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** Checks every open stream's credential now; resolves to how many streams it ended. */
    recheckCredentials(): Promise<number>;
  }
}
