import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const page = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/**
 * The dashboard's build: `npm run build:web` (run by `npm ci` through the package's prepare script, and by
 * `npm start` when web/dist is missing) writes web/dist, which the gateway serves: the dashboard at `/`, the
 * GraphQL explorer at `/graphiql`. Everything is bundled: no page loads anything from another origin.
 */
export default defineConfig({
  // Relative asset URLs: the page also works behind a proxy that mounts it under a path.
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The preload polyfill would be inline code, which the page's Content-Security-Policy refuses.
    modulePreload: { polyfill: false },
    // Small assets stay files rather than data: URLs.
    assetsInlineLimit: 0,
    // GraphiQL's editor (Monaco) is about 2.8 MB of script, loaded only by the explorer's page.
    chunkSizeWarningLimit: 3000,
    // Two pages: the dashboard (/) and the GraphQL explorer (/graphiql, GraphiQL and its editor's workers).
    rollupOptions: {
      input: { index: page('./index.html'), explorer: page('./explorer.html') },
      // GraphiQL's React modules open with "use client", which means nothing to a bundle for the browser.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  worker: { format: 'es' },
  logLevel: 'warn',
});
