import { defineConfig } from 'vite';

/**
 * The dashboard's build: `npm run build:web` (run by `npm ci` through the package's prepare script, and by
 * `npm start` when web/dist is missing) writes web/dist, which the gateway serves at `/`. Everything is
 * bundled: the page loads nothing from another origin.
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
  },
  logLevel: 'warn',
});
