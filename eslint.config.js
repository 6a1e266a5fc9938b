import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { layoutPlugin } from './tools/layout-rules.mjs';

/*
 * Lint: typescript-eslint's type-checked rules over every TypeScript file of the project (the service, its
 * tests, benchmarks and tools; the dashboard with its own tsconfig). `npm run lint` runs it with Prettier
 * and knip, with zero warnings allowed.
 */
export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      '.build/',
      'web/dist/',
      'bench/peers/node_modules/',
      'bench/results/',
      '**/*.d.ts',
      'data/',
      'features-data/',
      'subgraphs/*/schema-types.ts',
      'subgraphs/*/operation-types.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // fastify hooks, Apollo plugin hooks and interface methods are async by contract: an async function
      // without an await there is the contract kept, not a mistake.
      '@typescript-eslint/require-await': 'off',
      // `_`-prefixed parameters are positional ones a callback must accept and does not read.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // A route is known by fastify's match (`request.routeOptions.url`), never by reading the URL again: the
    // router decodes the path (`/%67raphql` is `/graphql`), so a hook that compares the raw URL with a
    // route's path misses requests the route serves (gateway/http/problem.ts, `onGraphQLRoute`).
    files: ['gateway/**/*.ts', 'platform/**/*.ts', 'subgraphs/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "BinaryExpression[operator=/^[!=]==?$/] > CallExpression[callee.name='pathOf']",
          message: "A route is known by fastify's match (request.routeOptions.url, onGraphQLRoute), not by comparing the URL's path.",
        },
        {
          selector: "BinaryExpression[operator=/^[!=]==?$/] > MemberExpression[property.name='url'][object.name=/^(request|req|raw)$/]",
          message: "A route is known by fastify's match (request.routeOptions.url, onGraphQLRoute), not by comparing request.url.",
        },
        {
          selector: "BinaryExpression[operator=/^[!=]==?$/] > MemberExpression[property.name='url'][object.property.name='raw']",
          message: "A route is known by fastify's match (request.routeOptions.url, onGraphQLRoute), not by comparing request.raw.url.",
        },
        {
          selector:
            "CallExpression[callee.property.name=/^(startsWith|endsWith|includes|match)$/][callee.object.property.name='url'][callee.object.object.name=/^(request|req)$/]",
          message: "A route is known by fastify's match (request.routeOptions.url, onGraphQLRoute), not by matching request.url.",
        },
        {
          selector: "CallExpression[callee.property.name='test'] > MemberExpression.arguments[property.name='url'][object.name=/^(request|req)$/]",
          message: "A route is known by fastify's match (request.routeOptions.url, onGraphQLRoute), not by matching request.url.",
        },
      ],
    },
  },
  {
    // The layout (tools/layout-rules.mjs): the layers, gateway/'s rooms and what each may import, and inside
    // a subgraph resolvers -> service -> store with the service handle named `service`. Judged as an import
    // is written; test/repository/architecture.test.ts reads every import of the tree by the same rules.
    files: ['gateway/**/*.ts', 'platform/**/*.{ts,mjs}', 'subgraphs/**/*.{ts,mjs}', 'schema/**/*.ts', 'tools/**/*.{ts,mjs}'],
    plugins: { layout: layoutPlugin },
    rules: { 'layout/imports': 'error', 'layout/service-handle': 'error' },
  },
  {
    // A function a reader can hold: at most 80 lines of code (blank lines and comments not counted). Test
    // suites (a describe's callback holds its cases) are containers, not functions, and are exempt; a
    // benchmark's table of figures is a module constant, not a function body.
    files: [
      'gateway/**/*.ts',
      'platform/**/*.{ts,mjs}',
      'subgraphs/**/*.{ts,mjs}',
      'schema/**/*.ts',
      'tools/**/*.{ts,mjs}',
      'bench/**/*.ts',
      'web/src/**/*.ts',
    ],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }] },
  },
  {
    // Tests and benchmarks read JSON answers off the wire (`Record<string, any>`) and check them with
    // `expect`: the assertions are their type checks, so the rules about untyped values stay off there.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The launcher and the build (tools/*.mjs) run on Node before anything is compiled.
    files: ['tools/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', performance: 'readonly', URL: 'readonly' } },
  },
);
