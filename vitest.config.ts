import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships ESM (index.mjs, which Vite prefers) and CJS (what Node and the Apollo packages load).
    // Two copies would be two realms ("Cannot use GraphQLSchema from another module"); use Node's one.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own servers on ephemeral ports; two cores, so two files at a time.
    maxWorkers: 2,
  },
});
