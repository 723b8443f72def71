/**
 * Every use of express-openapi-validator's internals (docs/development.md,
 * Borrowed internals): the route patterns and parameter reshaping below, the
 * contract's OpenAPI-schema check made by the build (skipUnusedSchemaValidator),
 * its preprocessing without compiling (preprocessWithoutCompiling), the
 * contract's bundling skipped where the build found it changes nothing
 * (skipIdleBundling), and its middleware made without a deep copy of the
 * contract (validatorMiddleware) and run as one (validator-chain.ts).
 *
 * express-openapi-validator (5.6) finds a request's operation by compiling
 * every documented path to a regular expression with path-to-regexp — on every
 * request, for every path until one matches (`lookupRoute` in its
 * openapi.metadata.js). The paths and options are the same each time, so the
 * compiled patterns are kept: the library calls `pathToRegexp` through the
 * module's exports object at call time, and that export is replaced, once, by
 * a memoizing wrapper (measured: about a twentieth of a task read's CPU).
 *
 * What it returns is unchanged (the same `{ regexp, keys }` objects; a
 * path-to-regexp 8 pattern has no `g` or `y` flag, so a shared RegExp keeps no
 * state between `exec` calls). Only string paths are kept, and at most
 * `MAX_PATTERNS` (the contract has a dozen). The wrapper is installed on the
 * path-to-regexp copy the validator itself resolves; express's router keeps
 * its own matchers, built once per route, and never calls this export.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as pathToRegexpImport from 'path-to-regexp';
import * as mutatorImport from 'express-openapi-validator/dist/middlewares/parsers/req.parameter.mutator.js';
import * as schemaValidatorImport from 'express-openapi-validator/dist/framework/openapi.schema.validator.js';
import * as preprocessorImport from 'express-openapi-validator/dist/middlewares/parsers/schema.preprocessor.js';
import * as frameworkImport from 'express-openapi-validator/dist/framework/index.js';
import * as specLoaderImport from 'express-openapi-validator/dist/framework/openapi.spec.loader.js';
import * as validatorClassImport from 'express-openapi-validator/dist/openapi.validator.js';
import type * as OpenApiValidatorPackage from 'express-openapi-validator';
import { PARSED_YAML_DIR, parsedYamlName } from '../yaml-file.ts';
import { writeWhole } from '../write-whole.ts';
import { STRICT_FORMATS } from './formats.ts';
import { validatorChain, type ValidatorObject } from './validator-chain.ts';

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => { regexp: RegExp; keys: unknown[] };
interface PathToRegexpModule {
  pathToRegexp: PathToRegexp & { memoized?: true };
}

const MAX_PATTERNS = 1000;

/**
 * `require` as express-openapi-validator's main file (dist/index.js) has it: its own dependencies, its own files.
 * For what only the build reads; what a start patches is imported (below).
 */
const fromValidator = () => createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));

/**
 * A CommonJS module's own exports object (what its `require` gives), from an
 * import of it: a static import, so that the build, which bundles the validator
 * (scripts/build.ts, BUNDLED_PACKAGES), bundles these very modules with it and
 * the patches reach the copies the bundled validator runs; from the sources, Node
 * gives the module its `require` gives (test/unit/borrowed-internals.test.ts
 * checks that the validator resolves `path-to-regexp` to the file this one does).
 */
const exportsOf = <T>(imported: unknown): T => (imported as { default: T }).default;

/** The path-to-regexp module express-openapi-validator requires. */
export function validatorsPathToRegexp(): PathToRegexpModule {
  return exportsOf<PathToRegexpModule>(pathToRegexpImport);
}

/** Makes the validator's route lookup reuse compiled path patterns. Idempotent. */
export function cacheValidatorRoutePatterns(): void {
  const mod = validatorsPathToRegexp();
  if (mod.pathToRegexp.memoized) return;
  const compile = mod.pathToRegexp;
  // By path, then by the three options as bits: the library passes the same path strings each time, whose
  // hash V8 keeps, so a lookup builds no key string (a new one per route tried, per request, had to be hashed).
  const patterns = new Map<string, Array<ReturnType<PathToRegexp> | undefined>>();
  let kept = 0;
  const memoized = (path: unknown, options?: Record<string, unknown>) => {
    if (typeof path !== 'string') return compile(path, options);
    const bits = (options?.sensitive ? 1 : 0) | (options?.strict ? 2 : 0) | (options?.end === false ? 4 : 0);
    const known = patterns.get(path)?.[bits];
    if (known) return known;
    const compiled = compile(path, options);
    // Options other than the three in the key would make the key ambiguous: never keep those.
    const plain = !options || Object.keys(options).every((k) => k === 'sensitive' || k === 'strict' || k === 'end');
    if (plain && kept < MAX_PATTERNS) {
      let slots = patterns.get(path);
      if (!slots) patterns.set(path, (slots = []));
      slots[bits] = compiled;
      kept++;
    }
    return compiled;
  };
  mod.pathToRegexp = Object.assign(memoized, { memoized: true as const });
}

interface Parameter {
  $ref?: string;
  in?: string;
  style?: string;
  content?: unknown;
  schema?: { $ref?: string; type?: unknown };
}
interface Mutator {
  _apiDocs: { components?: { parameters?: Record<string, Parameter> } };
  modifyRequest(req: { originalUrl: string; openapi?: { schema?: { parameters?: Parameter[] } } }): void;
}
type MutatorClass = { prototype: Mutator & { modifyRequest: Mutator['modifyRequest'] & { fastPath?: true } } };

/** The validator's request parameter mutator class (its own dist file: the package has no exports map, so its files can be imported). */
export function validatorsParameterMutator(): MutatorClass {
  return exportsOf<{ RequestParameterMutator: MutatorClass }>(mutatorImport).RequestParameterMutator;
}

const PRIMITIVES = new Set(['string', 'integer', 'number', 'boolean']);

/** A path or header parameter of one primitive type in the default style, with no `content`: the mutator leaves it alone. */
function untouched(doc: Mutator['_apiDocs'], p: Parameter): boolean {
  const param = p.$ref ? doc.components?.parameters?.[p.$ref.replace(/^.+\//, '')] : p;
  if (!param || param.content !== undefined || (param.in !== 'path' && param.in !== 'header')) return false;
  if (param.style !== undefined && param.style !== 'simple') return false;
  return !!param.schema && param.schema.$ref === undefined && typeof param.schema.type === 'string' && PRIMITIVES.has(param.schema.type);
}

/**
 * Before validating a request, express-openapi-validator (5.6) has its
 * `RequestParameterMutator.modifyRequest` reshape parameters by their style:
 * per request it parses the whole URL with the legacy `url.parse` (for the
 * query string's raw form), runs the query through its bracket-notation
 * handler, and walks the operation's parameters. For a request without a query
 * string to an operation whose parameters are all plain path or header values
 * (task reads, models, submissions), none of that changes anything: the query
 * is empty, and a path or header parameter of a primitive type in the default
 * style is left as it came. Those requests skip it (about a twentieth of a task
 * read's CPU); every other request runs it unchanged. Idempotent.
 */
export function skipIdleParameterMutation(): void {
  const proto = validatorsParameterMutator().prototype;
  if (proto.modifyRequest.fastPath) return;
  const modify = proto.modifyRequest;
  const plainOperations = new WeakMap<object, boolean>();
  const fast: Mutator['modifyRequest'] = function (this: Mutator, req) {
    const operation = req.openapi?.schema;
    if (operation && !req.originalUrl.includes('?')) {
      let plain = plainOperations.get(operation);
      if (plain === undefined) {
        plain = (operation.parameters ?? []).every((p) => untouched(this._apiDocs, p));
        plainOperations.set(operation, plain);
      }
      if (plain) return;
    }
    modify.call(this, req);
  };
  proto.modifyRequest = Object.assign(fast, { fastPath: true as const });
}

interface SchemaValidatorOptions {
  version: string;
  validateApiSpec: boolean;
}
interface SchemaValidator {
  validate(doc: unknown): { errors: unknown[] };
}
type SchemaValidatorClass = (new (opts: SchemaValidatorOptions) => SchemaValidator) & { lazy?: true };
interface SchemaValidatorModule {
  OpenAPISchemaValidator: SchemaValidatorClass;
}

/** The validator's check of a contract against the OpenAPI schema (its own dist file). */
function validatorsSchemaValidatorModule(): SchemaValidatorModule {
  return exportsOf<SchemaValidatorModule>(schemaValidatorImport);
}

/** The installed validator's version: a check the build made holds only for the version that made it. */
function validatorVersion(): string {
  return (fromValidator()('../package.json') as { version: string }).version;
}

/**
 * The note's text: the installed validator's version, and what the build ran
 * (a note of an earlier build, which only checked the schema, does not count);
 * `bundled`: the validator's bundling gave the contract back as it was read.
 */
const checkedNote = (bundled: boolean) => `${validatorVersion()} checked, preprocessing compiled${bundled ? ', bundling changes nothing' : ''}`;

/** Where the build notes that a contract's text passed the validator's own check (beside its parsed copy). */
const checkedMark = (text: string) => path.join(PARSED_YAML_DIR, `${parsedYamlName(text)}.checked`);

/**
 * For the build: runs the check express-openapi-validator runs at each start
 * (`validateApiSpec`: the contract, bundled as it bundles it, against the
 * OpenAPI schema) and, when it passes, notes it beside the contract's parsed
 * copy (the validator's version in the note). An invalid contract gets no note
 * and is checked, and refused, at start as before.
 */
export async function checkContractAtBuild(text: string, doc: { openapi: string }): Promise<boolean> {
  const refParser = fromValidator()('@apidevtools/json-schema-ref-parser') as { bundle(doc: unknown): Promise<unknown> };
  const { OpenAPISchemaValidator } = validatorsSchemaValidatorModule();
  const bundled = await refParser.bundle(structuredClone(doc));
  if (new OpenAPISchemaValidator({ version: doc.openapi, validateApiSpec: true }).validate(bundled).errors.length > 0) return false;
  if (!preprocessesAtBuild(bundled)) return false;
  // Written whole, then renamed, as the parsed copies are (a starting server never reads half a note).
  writeWhole(checkedMark(text), checkedNote(JSON.stringify(bundled) === JSON.stringify(doc)));
  return true;
}

/** The validator's format options, as app.ts gives them and the build's preprocessing (preprocessesAtBuild) reads them. */
export const VALIDATOR_FORMATS = { validateFormats: true, formats: STRICT_FORMATS } as const;

/**
 * Whether the validator's own preprocessing of the bundled contract runs with
 * every component schema compiled, as it ran at each start before
 * preprocessWithoutCompiling: a schema that cannot compile then fails here, and
 * its contract gets no note (the start compiles, and refuses, as before).
 */
function preprocessesAtBuild(bundled: unknown): boolean {
  const { AjvOptions } = fromValidator()('./framework/ajv/options.js') as { AjvOptions: new (options: unknown) => { preprocessor: unknown } };
  // Preprocessing edits these after compiling a discriminator's branches: their validators are then compiled at start as before.
  if (/"(?:readOnly|writeOnly)":/.test(JSON.stringify(bundled))) return false;
  const doc = structuredClone(bundled) as { components?: { schemas?: Record<string, unknown> } };
  // The options app.ts gives the validator, as far as preprocessing reads them (formats; no serializers).
  const ajvOptions = new AjvOptions({ serDes: [], ajvFormats: { mode: 'fast' }, ...VALIDATOR_FORMATS }).preprocessor;
  try {
    const Preprocessor = validatorsSchemaPreprocessor();
    const preprocessor = new Preprocessor(doc, ajvOptions, false);
    // The library's own methods, also in a process where preprocessWithoutCompiling is installed (tests build in-process).
    const { resolveSchema, preProcess } = Preprocessor.prototype;
    Object.assign(preprocessor, { resolveSchema: resolveSchema.library ?? resolveSchema });
    for (const id of Object.keys(doc.components?.schemas ?? {})) preprocessor.ajv.getSchema(`#/components/schemas/${id}`);
    (preProcess.library ?? preProcess).call(preprocessor);
    return true;
  } catch {
    return false;
  }
}

/** The build's note on the contract in `file` as it reads now (checkContractAtBuild), or undefined. */
function buildNoteOf(file: string): string | undefined {
  try {
    return fs.readFileSync(checkedMark(fs.readFileSync(file, 'utf8')), 'utf8');
  } catch {
    return undefined;
  }
}

/** Whether the contract in `file`, as it reads now, passed the build's check (checkContractAtBuild) with the installed validator. */
export function contractCheckedByBuild(file: string): boolean {
  const note = buildNoteOf(file);
  return note === checkedNote(false) || note === checkedNote(true);
}

/** Whether the build also found that the validator's bundling gives the contract in `file` back as it reads (see skipIdleBundling). */
export function contractBundledByBuild(file: string): boolean {
  return buildNoteOf(file) === checkedNote(true);
}

interface Framework {
  loadSpec(spec: unknown, refParser?: { mode?: string }): Promise<unknown>;
}
type LoadSpec = Framework['loadSpec'] & { skipsBundling?: true };

/** The validator's framework class, which loads the contract (its own dist file). */
export function validatorsFramework(): { prototype: { loadSpec: LoadSpec } } {
  return exportsOf<{ OpenAPIFramework: { prototype: { loadSpec: LoadSpec } } }>(frameworkImport).OpenAPIFramework;
}

type MiddlewareOptions = Parameters<typeof OpenApiValidatorPackage.middleware>[0];
type Middleware = ReturnType<typeof OpenApiValidatorPackage.middleware>;
interface ValidatorClass {
  new (options: MiddlewareOptions): { installMiddleware(spec: Promise<unknown>): Middleware };
}
interface SpecLoaderClass {
  new (args: { apiDoc: unknown; validateApiSpec?: boolean; $refParser?: unknown }): { load(): Promise<unknown> };
}

/**
 * express-openapi-validator's `middleware(options)` (5.6, its dist/index.js),
 * step for step, but for the deep copy of the contract it makes first (lodash's
 * cloneDeep of the whole document, about 5 % of a start's CPU): the contract
 * object given is the one the validator loads, preprocesses and keeps, so the
 * caller gives one that nothing else holds (app.ts: a fresh read). The
 * package's own `middleware` still gets `_oav`, as the library sets it. Its
 * middleware list is run as one middleware (validator-chain.ts).
 */
export function validatorMiddleware(middleware: typeof OpenApiValidatorPackage.middleware, options: MiddlewareOptions): Middleware {
  const { OpenApiValidator } = exportsOf<{ OpenApiValidator: ValidatorClass }>(validatorClassImport);
  const { OpenApiSpecLoader } = exportsOf<{ OpenApiSpecLoader: SpecLoaderClass }>(specLoaderImport);
  // The constructor fills in the options' defaults (validateApiSpec, $refParser) that the loader then reads.
  const oav = new OpenApiValidator(options);
  (middleware as typeof middleware & { _oav?: unknown })._oav = oav;
  const spec = new OpenApiSpecLoader({ apiDoc: options.apiSpec, validateApiSpec: options.validateApiSpec, $refParser: options.$refParser }).load();
  // Its middleware list as one middleware that stops waiting for the contract once loaded (validator-chain.ts).
  return validatorChain(oav as unknown as ValidatorObject, spec as Promise<{ apiDoc: unknown }>);
}

/** Contracts whose bundling the build found to change nothing (marked by asBundled). */
const bundledAsRead = new WeakSet<object>();

/** Marks a contract (an object handed to the validator) whose bundling the build found to change nothing: contractBundledByBuild. */
export function asBundled<T extends object>(doc: T): T {
  bundledAsRead.add(doc);
  return doc;
}

/**
 * express-openapi-validator (5.6) loads the contract it is given, an object
 * too, by bundling it with its JSON-schema ref parser (`loadSpec` in its
 * framework/index.js): a walk of the whole document that resolves every
 * `$ref` and changes none where every ref is internal, as ours are. It edits
 * the object it is given (the parser's `mutateInputSchema`) and returns it.
 * For a contract the build bundled and found unchanged (contractBundledByBuild,
 * marked with asBundled), that object is returned without the walk (about
 * 3 % of a start's CPU); any other, or a path, is loaded by the library as
 * before. Idempotent.
 */
export function skipIdleBundling(): void {
  const proto = validatorsFramework().prototype;
  if (proto.loadSpec.skipsBundling) return;
  const load = proto.loadSpec;
  const fast: LoadSpec = function (this: Framework, spec, refParser) {
    if (typeof spec === 'object' && spec !== null && bundledAsRead.has(spec) && (refParser?.mode ?? 'bundle') === 'bundle') return Promise.resolve(spec);
    return load.call(this, spec, refParser);
  };
  proto.loadSpec = Object.assign(fast, { skipsBundling: true as const });
}

/**
 * express-openapi-validator (5.6) builds its OpenAPI-schema validator at every
 * start, `validateApiSpec` or not: the OpenAPI 3.1 schema added to a fresh Ajv
 * and compiled (about a tenth of a start's CPU), then used only when
 * `validateApiSpec` is on. With it off (a contract the build checked:
 * contractCheckedByBuild), nothing is compiled; with it on, the library's class
 * runs as before. Idempotent.
 */
export function skipUnusedSchemaValidator(): void {
  const mod = validatorsSchemaValidatorModule();
  if (mod.OpenAPISchemaValidator.lazy) return;
  const Full = mod.OpenAPISchemaValidator;
  // Called with `new` by the library: an object returned from a constructor is what `new` gives.
  const Lazy = function (opts: SchemaValidatorOptions): SchemaValidator {
    if (opts.validateApiSpec) return new Full(opts);
    return {
      validate() {
        throw new Error('the contract was checked by the build: the validator has no OpenAPI-schema validator to run');
      },
    };
  } as unknown as SchemaValidatorClass;
  mod.OpenAPISchemaValidator = Object.assign(Lazy, { lazy: true as const });
}

interface RegisteredSchema {
  schema: unknown;
}
type Validate = ((this: unknown, ...args: unknown[]) => boolean) & { errors?: unknown };
interface Preprocessor {
  ajv: {
    schemas: Record<string, RegisteredSchema | string | undefined>;
    refs: Record<string, RegisteredSchema | string | undefined>;
    compile(schema: unknown): Validate;
    getSchema(ref: string): Validate | undefined;
  };
  resolvedSchemaCache: Map<string, unknown>;
}
/** The patched methods keep the library's own under `library` (the build preprocesses with those: preprocessesAtBuild). */
type ResolveSchema = ((this: Preprocessor, schema: unknown) => unknown) & { withoutCompiling?: true; library?: ResolveSchema };
type PreProcess = ((this: Preprocessor) => unknown) & { library?: PreProcess };
type PreprocessorClass = {
  new (doc: unknown, ajvOptions: unknown, validateResponses: unknown): Preprocessor & { preProcess(): unknown };
  prototype: { resolveSchema: ResolveSchema; preProcess: PreProcess };
};

/** The validator's contract preprocessor class (its own dist file). */
export function validatorsSchemaPreprocessor(): PreprocessorClass {
  return exportsOf<{ SchemaPreprocessor: PreprocessorClass }>(preprocessorImport).SchemaPreprocessor;
}

/** The schema Ajv holds under `ref` (following its aliases), without compiling it; undefined where Ajv would have to resolve it. */
function registeredSchema(ajv: Preprocessor['ajv'], ref: string): RegisteredSchema | undefined {
  // Ajv normalizes a key by dropping a trailing `#` or `#/`: such refs go the library's way.
  for (let key = ref, hops = 0; hops < 8 && !/#\/?$/.test(key); hops++) {
    const found = ajv.schemas[key] ?? ajv.refs[key];
    if (typeof found === 'string') key = found;
    else return found && typeof found === 'object' && 'schema' in found ? found : undefined;
  }
  return undefined;
}

/** A validator that compiles `schema` with `compile` at its first call, then is that validator (its `errors` copied after each call). */
function compiledAtFirstCall(compile: (schema: unknown) => Validate, schema: unknown): Validate {
  let compiled: Validate | undefined;
  const validate: Validate = function (this: unknown, ...args: unknown[]) {
    compiled ??= compile(schema);
    const valid = compiled.apply(this, args);
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = null;
  return validate;
}

/**
 * express-openapi-validator (5.6) preprocesses the contract once, at the first
 * request (`SchemaPreprocessor.preProcess`), and compiled about a sixth of a
 * start's CPU there, none of it needed by that request:
 *
 * - each `$ref` it meets is resolved with `ajv.getSchema(ref).schema`: Ajv
 *   compiles a validator for every component schema only for its `.schema`, the
 *   object it was registered with, and the validator is thrown away (requests
 *   are validated by another Ajv). For a ref Ajv holds (every
 *   `#/components/schemas/…`) the registered object is now returned directly,
 *   the same object `getSchema(ref).schema` is; any other ref goes the library's way;
 * - each branch of a `oneOf` with a discriminator gets its validator compiled
 *   there (the media audio envelope's): compiled now at its first call, by the
 *   same Ajv, from the same schema copy. Preprocessing edits schemas after that
 *   point only for readOnly/writeOnly properties and serializer formats; the
 *   build grants a contract with either no note (preprocessesAtBuild), and
 *   app.ts gives no serializers.
 *
 * What compiling there also did is refuse a schema that cannot compile (a
 * missing ref, a broken pattern) before any request: this is installed only for
 * a contract the build preprocessed with everything compiled
 * (checkContractAtBuild). Idempotent.
 */
export function preprocessWithoutCompiling(): void {
  const proto = validatorsSchemaPreprocessor().prototype;
  if (proto.resolveSchema.withoutCompiling) return;
  const resolve = proto.resolveSchema;
  const fast: ResolveSchema = function (this: Preprocessor, schema) {
    const ref = (schema as { $ref?: unknown } | null | undefined)?.$ref;
    if (typeof ref === 'string' && !this.resolvedSchemaCache.has(ref)) {
      const registered = registeredSchema(this.ajv, ref);
      if (registered) {
        this.resolvedSchemaCache.set(ref, registered.schema);
        return registered.schema;
      }
    }
    return resolve.call(this, schema);
  };
  proto.resolveSchema = Object.assign(fast, { withoutCompiling: true as const, library: resolve });
  const preProcess = proto.preProcess;
  const lazy: PreProcess = function (this: Preprocessor) {
    // Only the discriminator step calls this Ajv's compile during preprocessing (and nothing after it).
    const compile = this.ajv.compile.bind(this.ajv);
    this.ajv.compile = (schema) => compiledAtFirstCall(compile, schema);
    try {
      return preProcess.call(this);
    } finally {
      delete (this.ajv as Partial<Preprocessor['ajv']>).compile;
    }
  };
  proto.preProcess = Object.assign(lazy, { library: preProcess });
}
