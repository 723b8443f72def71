/**
 * Tripwires on the libraries' private internals that gemforge relies on, so a
 * library upgrade that changes them fails here first. Each library's internals
 * are used in one adapter file; each test
 * here checks what that file relies on, against the version installed, and fails
 * with a message naming the file and the version package.json pins: an upgrade
 * that changes them is then a conscious act (read the file, re-measure what it
 * buys, adapt or drop it), never a silent breakage. What each one buys:
 * docs/development.md, "Borrowed internals".
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import express from 'express';
import knex from 'knex';
import pino from 'pino';
import SqliteDialect from 'knex/lib/dialects/sqlite3/index.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const pins = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies;
const installed = (name: string) => (JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

/** Fails with the library, its pinned and installed versions, the adapter file and what changed. */
function tripwire(library: string, file: string) {
  return (ok: unknown, what: string) =>
    assert.ok(ok, `${library} ${installed(library)} (package.json pins ${pins[library]}): ${what} — ${file} relies on it; read that file before upgrading`);
}

describe('borrowed internals', () => {
  it('when the libraries are installed, then each is the exact version package.json pins (an upgrade is a conscious act)', () => {
    for (const name of ['knex', 'express', 'pino', 'express-openapi-validator', 'pg', 'sqlite3']) {
      assert.match(pins[name] ?? '', /^\d+\.\d+\.\d+$/, `${name} is pinned to an exact version in package.json`);
      assert.equal(installed(name), pins[name], `${name}: installed ${installed(name)}, package.json pins ${pins[name]}`);
    }
  });

  it('when knex is used past its API (server/storage/engine/knex-adapter.ts), then what the adapter relies on is there', async () => {
    const check = tripwire('knex', 'server/storage/engine/knex-adapter.ts');
    check(
      typeof (SqliteDialect as unknown as { prototype: { queryCompiler?: unknown } }).prototype.queryCompiler === 'function',
      'the SQLite dialect class (knex/lib/dialects/sqlite3) with a queryCompiler method',
    );
    const db = knex({ client: SqliteDialect, connection: { filename: ':memory:' }, useNullAsDefault: true });
    try {
      const builder = db('t').select('a').limit(1);
      const single = (builder as unknown as { _single?: Record<string, unknown> })._single;
      check(single && single.limit === 1, "a builder's _single.limit (where SqliteClient writes LIMIT into the SQL)");
      const select = builder.toSQL() as unknown as { method?: string; returning?: unknown };
      const insert = db('t').insert({ a: 1 }).toSQL() as unknown as { method?: string };
      const returning = db('t').insert({ a: 1 }).returning('a').toSQL() as unknown as { returning?: unknown };
      check(select.method === 'select' && insert.method === 'insert' && returning.returning !== undefined, "toSQL()'s method and returning (statementKind)");
      const context = (db as unknown as { context?: { client?: unknown; queryBuilder?: unknown } }).context;
      check(
        context && context.client === db.client && typeof context.queryBuilder === 'function',
        "the knex instance's context with its client and queryBuilder (leanTransaction's transaction function)",
      );
      const client = db.client as unknown as Record<string, unknown>;
      check(
        ['query', 'stream', 'acquireConnection', 'releaseConnection'].every((m) => typeof client[m] === 'function'),
        "the client's query, stream, acquireConnection and releaseConnection (leanTransaction's client)",
      );
      const paged = db('t')
        .select('a')
        .offset(db.raw('?', [7]))
        .toSQL();
      check(
        / offset \?$/.test(paged.sql) && paged.bindings.includes(7),
        'offset() taking a raw binding (the overload knex-adapter.ts declares; storage/voices.ts pages with it)',
      );
      const source = fs.readFileSync(path.join(ROOT, 'node_modules/knex/lib/client.js'), 'utf8');
      check(source.includes('__knex__disposed'), 'the pool giving up a connection marked __knex__disposed (leanTransaction after a failed ROLLBACK)');
    } finally {
      await db.destroy();
    }
  });

  it('when Express routers are read (server/http/route-prefix.ts), then a router lists its routes in .stack with their paths', () => {
    const check = tripwire('express', 'server/http/route-prefix.ts');
    const router = express.Router();
    router.get('/api/x/:id', (_req, res) => void res.end());
    const stack = (router as unknown as { stack?: Array<{ route?: { path?: unknown } }> }).stack;
    check(Array.isArray(stack) && stack[0]?.route?.path === '/api/x/:id', "a router's stack of layers with route.path");
  });

  it("when pino's logger is written past its API (server/logger.ts), then its stream, bindings and time symbols are there", () => {
    const check = tripwire('pino', 'server/logger.ts');
    const { streamSym, chindingsSym, timeSym } = pino.symbols;
    check(typeof streamSym === 'symbol' && typeof chindingsSym === 'symbol' && typeof timeSym === 'symbol', 'pino.symbols.streamSym, chindingsSym and timeSym');
    const logger = pino({ base: { pid: 1 } }, pino.destination({ dest: process.platform === 'win32' ? 'NUL' : '/dev/null', sync: true }));
    const internals = logger as unknown as Record<symbol, unknown>;
    check(typeof (internals[streamSym] as { flush?: unknown }).flush === 'function', "the logger's destination under streamSym, with flush");
    check(
      typeof internals[timeSym] === 'function' && /^,"time":\d+$/.test((internals[timeSym] as () => string)()),
      'the time function under timeSym giving `,"time":<ms>`',
    );
    check(internals[chindingsSym] === ',"pid":1', 'the bindings under chindingsSym as a JSON fragment');
  });

  it('when express-openapi-validator is sped up (server/http/validator-routes.ts), then the dist files and exports it patches are there', () => {
    const check = tripwire('express-openapi-validator', 'server/http/validator-routes.ts');
    const fromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
    const mutator = (
      fromValidator('./middlewares/parsers/req.parameter.mutator.js') as { RequestParameterMutator?: { prototype?: { modifyRequest?: unknown } } }
    ).RequestParameterMutator;
    check(
      typeof mutator?.prototype?.modifyRequest === 'function',
      'dist/middlewares/parsers/req.parameter.mutator.js exporting RequestParameterMutator with modifyRequest',
    );
    const mutatorSource = fs.readFileSync(fromValidator.resolve('./middlewares/parsers/req.parameter.mutator.js'), 'utf8');
    check(mutatorSource.includes('this._apiDocs'), "the mutator's _apiDocs");
    check(
      typeof (fromValidator('path-to-regexp') as { pathToRegexp?: unknown }).pathToRegexp === 'function',
      'its own path-to-regexp with a pathToRegexp export',
    );
    check(
      fromValidator.resolve('path-to-regexp') === createRequire(path.join(ROOT, 'server/http/validator-routes.ts')).resolve('path-to-regexp'),
      'its path-to-regexp the very file validator-routes.ts imports (the patch must reach the validator, bundled or not)',
    );
    const metadata = fs.readFileSync(fromValidator.resolve('./middlewares/openapi.metadata.js'), 'utf8');
    check(
      /\(0, path_to_regexp_1\.pathToRegexp\)\(/.test(metadata),
      'openapi.metadata.js calling pathToRegexp through the module object at call time (what the memoizing wrapper replaces)',
    );
    const schemaValidator = fromValidator('./framework/openapi.schema.validator.js') as { OpenAPISchemaValidator?: { prototype?: { validate?: unknown } } };
    check(
      typeof schemaValidator.OpenAPISchemaValidator?.prototype?.validate === 'function',
      'dist/framework/openapi.schema.validator.js exporting OpenAPISchemaValidator with validate',
    );
    const framework = fs.readFileSync(fromValidator.resolve('./framework/index.js'), 'utf8');
    check(
      /new openapi_schema_validator_1\.OpenAPISchemaValidator\(/.test(framework) &&
        /if \(validateApiSpec\) \{\s*const apiDocValidation = validator\.validate\(/.test(framework),
      'framework/index.js building OpenAPISchemaValidator through the module object, and calling validate only under validateApiSpec (what the lazy class relies on)',
    );
    const preprocessorModule = fromValidator('./middlewares/parsers/schema.preprocessor.js') as {
      SchemaPreprocessor?: { prototype?: Record<string, unknown> };
    };
    const preprocessor = preprocessorModule.SchemaPreprocessor?.prototype;
    check(
      typeof preprocessor?.resolveSchema === 'function' && typeof preprocessor.preProcess === 'function',
      'dist/middlewares/parsers/schema.preprocessor.js exporting SchemaPreprocessor with resolveSchema and preProcess',
    );
    const preprocessorSource = fs.readFileSync(fromValidator.resolve('./middlewares/parsers/schema.preprocessor.js'), 'utf8');
    check(
      /this\.resolvedSchemaCache = new Map\(\)/.test(preprocessorSource) &&
        /this\.ajv = \(0, ajv_1\.createRequestAjv\)\(/.test(preprocessorSource) &&
        /this\.ajv\.getSchema\(ref\)\) === null \|\| _a === void 0 \? void 0 : _a\.schema/.test(preprocessorSource),
      "the preprocessor's resolvedSchemaCache and Ajv, and resolveSchema taking getSchema(ref).schema (what preprocessWithoutCompiling looks up instead)",
    );
    check(
      (preprocessorSource.match(/this\.ajv\.compile\(/g) ?? []).length === 1 &&
        /validators\[option\] =\s*this\.ajv\.compile\(newSchema\)/.test(preprocessorSource),
      "the preprocessor compiling with its Ajv only a discriminator's branch validators (what preprocessWithoutCompiling compiles at their first call)",
    );
    check(
      /this\.handleSerDes\(pschema, nschema, options\);\s*this\.handleReadonly\(pschema, nschema, options\);\s*this\.handleWriteonly\(pschema, nschema, options\);\s*this\.processDiscriminator\(pschema, nschema, options\);\s*this\.removeSchemaExamples\(pschema, nschema, options\);/.test(
        preprocessorSource,
      ),
      "the preprocessor's schema visitor (serializers, readOnly, writeOnly, discriminator, examples): only the first three edit what a discriminator's validators read (checkContractAtBuild refuses readOnly and writeOnly)",
    );
    const { AjvOptions } = fromValidator('./framework/ajv/options.js') as { AjvOptions?: new (o: unknown) => { preprocessor?: Record<string, unknown> } };
    const ajvOptions = AjvOptions && new AjvOptions({ serDes: [], validateFormats: true, formats: {} }).preprocessor;
    check(ajvOptions?.strict === false && ajvOptions.validateSchema === false, "dist/framework/ajv/options.js's AjvOptions and its preprocessor options");
    const { createRequestAjv } = fromValidator('./framework/ajv/index.js') as { createRequestAjv?: (doc: unknown, o: unknown) => Record<string, unknown> };
    const ajv = createRequestAjv?.({ openapi: '3.1.0', components: { schemas: { A: { type: 'string' } } } }, ajvOptions);
    const held = (ajv?.schemas as Record<string, { schema?: unknown; validate?: unknown }> | undefined)?.['#/components/schemas/A'];
    check(
      held !== undefined && (held.schema as { type?: string }).type === 'string' && held.validate === undefined && typeof ajv?.refs === 'object',
      'Ajv holding each component schema, uncompiled, in .schemas under its ref (and others in .refs)',
    );
    check(
      fs.existsSync(fromValidator.resolve('@apidevtools/json-schema-ref-parser')),
      'its own @apidevtools/json-schema-ref-parser (the bundling the build checks the contract after)',
    );
    const { OpenAPIFramework } = fromValidator('./framework/index.js') as { OpenAPIFramework?: { prototype?: { loadSpec?: unknown } } };
    check(typeof OpenAPIFramework?.prototype?.loadSpec === 'function', 'dist/framework/index.js exporting OpenAPIFramework with loadSpec');
    check(
      /const apiDoc = await this\.loadSpec\(args\.apiDoc, args\.\$refParser\);/.test(framework) &&
        /loadSpec\(filePath, \$refParser = \{ mode: 'bundle' \}\)/.test(framework) &&
        /: \$RefParser\.bundle\(filePath\);\s*return doc;\s*\}\s*sortApiDocTags/.test(framework),
      'the framework loading the contract through this.loadSpec, which bundles an object it is given by default (what skipIdleBundling skips for a contract the build bundled unchanged)',
    );
    const index = fs.readFileSync(fromValidator.resolve('./index.js'), 'utf8');
    check(
      /function openapiValidator\(options\) \{\s*const oav = new openapi_validator_1\.OpenApiValidator\(options\);\s*exports\.middleware\._oav = oav;\s*return oav\.installMiddleware\(new openapi_spec_loader_1\.OpenApiSpecLoader\(\{\s*apiDoc: cloneDeep\(options\.apiSpec\),\s*validateApiSpec: options\.validateApiSpec,\s*\$refParser: options\.\$refParser,\s*\}\)\.load\(\)\);\s*\}/.test(
        index,
      ),
      'dist/index.js making its middleware as validatorMiddleware repeats it (OpenApiValidator, _oav, OpenApiSpecLoader over a deep copy of apiSpec, load)',
    );
    const { OpenApiValidator } = fromValidator('./openapi.validator.js') as { OpenApiValidator?: { prototype?: { installMiddleware?: unknown } } };
    const { OpenApiSpecLoader } = fromValidator('./framework/openapi.spec.loader.js') as { OpenApiSpecLoader?: { prototype?: { load?: unknown } } };
    // server/http/validator-chain.ts repeats installMiddleware's list: its steps, their order, the methods that make them.
    const install = String(OpenApiValidator?.prototype?.installMiddleware);
    const order = [
      'pathParamsMiddleware',
      'metadataMiddleware',
      'securityMiddleware',
      'multipartMiddleware',
      'requestMiddleware',
      'responseMiddleware',
      'operationHandlersMiddleware',
    ];
    const at = order.map((name) => install.indexOf(`function ${name}(req, res, next)`));
    const proto = (OpenApiValidator?.prototype ?? {}) as Record<string, unknown>;
    check(
      at.every((i, k) => i >= 0 && (k === 0 || i > at[k - 1]!)) &&
        /new schema_preprocessor_1\.SchemaPreprocessor\(apiDoc, ajvOpts, resOpts\)\.preProcess\(\)/.test(install) &&
        /new openapi_context_1\.OpenApiContext\(spec, this\.options\.ignorePaths, this\.options\.ignoreUndocumented, this\.options\.useRequestUrl\)/.test(
          install,
        ) &&
        /self\.options\.validateSecurity && \(components === null \|\| components === void 0 \? void 0 : components\.securitySchemes\)/.test(install) &&
        [
          'installPathParams',
          'metadataMiddleware',
          'securityMiddleware',
          'multipartMiddleware',
          'requestValidationMiddleware',
          'responseValidationMiddleware',
        ].every((m) => typeof proto[m] === 'function'),
      `dist/openapi.validator.js installMiddleware making ${order.join(', ')} in this order from the preprocessed contract and its OpenApiContext, through the methods validator-chain.ts calls`,
    );
    check(
      typeof OpenApiValidator?.prototype?.installMiddleware === 'function' && typeof OpenApiSpecLoader?.prototype?.load === 'function',
      'dist/openapi.validator.js exporting OpenApiValidator with installMiddleware, dist/framework/openapi.spec.loader.js OpenApiSpecLoader with load',
    );
    const refParserOptions = fromValidator('@apidevtools/json-schema-ref-parser') as {
      getJsonSchemaRefParserDefaultOptions?: () => { mutateInputSchema?: unknown };
    };
    check(
      refParserOptions.getJsonSchemaRefParserDefaultOptions?.().mutateInputSchema === true,
      'the ref parser editing and returning the very object it bundles (mutateInputSchema by default): skipIdleBundling returns that object',
    );
  });

  it("when a broken request body is answered (server/http/client-error.ts), then Node's socket names the response it is writing as _httpMessage", async () => {
    let seen: unknown;
    const server = http.createServer((req, res) => {
      seen = (req.socket as unknown as { _httpMessage?: unknown })._httpMessage === res;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      await fetch(`http://127.0.0.1:${port}/`).then((r) => r.arrayBuffer());
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    assert.equal(seen, true, `Node ${process.version}: a server socket's _httpMessage is no longer its response — server/http/client-error.ts relies on it`);
  });
});
