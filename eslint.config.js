/**
 * The linter: typescript-eslint with type information (the program tsc builds,
 * found through projectService), so its rules see what a syntax-only linter
 * cannot: a promise nobody awaits, an async function handed to a caller that
 * ignores what it returns, an assertion the types already make. The rule set is
 * small on purpose: each rule catches a defect, none is a matter of taste
 * (layout is prettier's, see .prettierrc.json). Why typed linting, and what a
 * run costs: docs/development.md, "Lint and format".
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tseslint from 'typescript-eslint';

/**
 * The local rule's version is this file's content: eslint's cache keys results
 * by the config's serialised form, in which a plugin is only its name and
 * version, so an edit here must change the version to re-lint.
 */
const version = createHash('sha1')
  .update(readFileSync(import.meta.filename))
  .digest('hex');

/**
 * no-unnecessary-type-assertion, except on an indexed read (`list[i]!`): with
 * noUncheckedIndexedAccess off the type says the element is there, and the `!`
 * is kept as the reader's mark that an index may miss. Its hint to move an
 * assertion into type arguments is a matter of taste, not a defect: left out.
 */
const base = tseslint.plugin.rules['no-unnecessary-type-assertion'];
const indexedRead = (node) => node?.type === 'TSNonNullExpression' && node.expression.type === 'MemberExpression' && node.expression.computed;
const unnecessaryAssertion = {
  ...base,
  create(context) {
    const report = (descriptor) =>
      indexedRead(descriptor.node) || descriptor.messageId === 'contextuallyInferredTypeArguments' ? undefined : context.report(descriptor);
    return base.create(Object.create(context, { report: { value: report } }));
  },
};

/** node:test's describe/it return promises the runner itself awaits. */
const nodeTest = { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] };

/** Every TypeScript file: the defects types can see. */
const everywhere = {
  '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [nodeTest] }],
  '@typescript-eslint/no-misused-promises': 'error',
  '@typescript-eslint/await-thenable': 'error',
  '@typescript-eslint/return-await': ['error', 'in-try-catch'],
  '@typescript-eslint/no-unused-vars': [
    'error',
    { args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
  ],
  'local/no-unnecessary-type-assertion': 'error',
};

/** The shipped code (server, client) also refuses `any` leaking into typed values; tests and scripts read JSON freely. */
const shipped = {
  '@typescript-eslint/no-unsafe-argument': 'error',
  '@typescript-eslint/no-unsafe-assignment': 'error',
  '@typescript-eslint/no-unsafe-return': 'error',
};

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/',
      'dist/',
      'client/dist/',
      'generated/',
      'client/generated/',
      'test/generated-clients/hey-api.ts',
      'test/generated-clients/orval.ts',
      'test/fixtures/',
      'data/',
      '.scratch*/',
      'test-artifacts/',
    ],
  },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: {
      '@typescript-eslint': tseslint.plugin,
      local: { meta: { name: 'local', version }, rules: { 'no-unnecessary-type-assertion': unnecessaryAssertion } },
    },
    rules: everywhere,
  },
  { files: ['server/**/*.ts', 'client/**/*.ts'], rules: shipped },
  {
    files: ['**/*.js', '**/*.mjs'],
    rules: { 'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }] },
  },
);
