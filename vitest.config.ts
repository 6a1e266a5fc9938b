import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';
import { FileTimesReporter } from './test/support/file-times.js';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships ESM (index.mjs, which Vite prefers) and CJS (what Node and the Apollo packages load).
    // Two copies would be two realms ("Cannot use GraphQLSchema from another module"); use Node's one.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // One migrated PGlite database per run, copied for each test server.
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    // Upper bounds for a busy machine, not expected durations. Every wait in the suite is on a condition
    // with its own deadline (test/support/wait.ts, 60 s) that fails naming what it waited for; these
    // catch only what hangs outside such a wait. A server start takes about 1 s on an idle machine and
    // more than 10 s on a loaded one, and some tests start several.
    testTimeout: 180_000,
    hookTimeout: 240_000,
    teardownTimeout: 60_000,
    // A test that passes on a second try is a race to fix, not to hide.
    retry: 0,
    // Each file starts its own servers on ephemeral ports: one file per core, two at most.
    maxWorkers: Math.max(1, Math.min(2, availableParallelism())),
    slowTestThreshold: 5_000,
    reporters: ['default', new FileTimesReporter(30_000)],
  },
});
