/**
 * A request without an Authorization header, answered 401 before the validator
 * runs (cheaper: the validator reaches the same answer only after matching the
 * route, throwing and catching an Error of its own and wrapping it in another).
 *
 * Only where the validator's answer would be that same 401: the path and method
 * are a documented operation (an unknown route or method stays the validator's
 * 404, which comes first), every security requirement of the operation needs the
 * bearer key, and the path's parameters decode (a malformed one stays 404). The
 * match copies the validator's: each contract path as an Express route
 * (`{id}` → one segment), case-insensitive, with an optional trailing slash,
 * against the URL without its query. Body problems wait for authentication
 * anyway (http/body.ts), so they cannot come first.
 */
import type { NextFunction, Request, Response } from 'express';
import { readYamlFile } from '../yaml-file.ts';
import { invalidApiKey } from '../domain/errors.ts';

interface SecurityScheme {
  type?: string;
  scheme?: string;
}
interface Contract {
  servers?: Array<{ url?: string }>;
  security?: Array<Record<string, unknown>>;
  components?: { securitySchemes?: Record<string, SecurityScheme> };
  paths?: Record<string, Record<string, { security?: Array<Record<string, unknown>> } | unknown>>;
}

const escapeRegExp = (text: string) => text.replace(/[.+*?^${}()[\]|/\\]/g, '\\$&');

/** A contract path as the validator's path-to-regexp matches it (`/tasks/{id}` → `/^(?:\/tasks\/([^\/]+))(?:\/$)?$/i`). */
export function contractPathRegExp(path: string): RegExp {
  const source = path
    .split(/(\{[^}/]+\})/)
    .map((part) => (/^\{[^}/]+\}$/.test(part) ? '([^\\/]+)' : escapeRegExp(part)))
    .join('');
  return new RegExp(`^(?:${source})(?:\\/$)?$`, 'i');
}

/** The documented routes whose every security requirement needs the bearer key, by method (lower case). */
export function bearerOnlyRoutes(contract: Contract): Array<{ pattern: RegExp; methods: Map<string, boolean> }> {
  // The validator puts a server URL's own path in front of every route; this
  // contract's server has none, and with one the short cut simply stands aside.
  if ((contract.servers ?? []).some((s) => !/^(?:[a-z][a-z0-9+.-]*:\/\/[^/]*)?\/?$/i.test(s.url ?? ''))) return [];
  const schemes = contract.components?.securitySchemes ?? {};
  const isBearer = (name: string) => schemes[name]?.type?.toLowerCase() === 'http' && schemes[name]?.scheme?.toLowerCase() === 'bearer';
  const needsKey = (security: Array<Record<string, unknown>> | undefined) =>
    Array.isArray(security) && security.length > 0 && security.every((requirement) => Object.keys(requirement).some(isBearer));
  return Object.entries(contract.paths ?? {}).map(([path, item]) => ({
    pattern: contractPathRegExp(path),
    methods: new Map(
      Object.entries(item)
        .filter(([method]) => /^(get|put|post|delete|options|head|patch|trace)$/.test(method))
        .map(([method, op]) => [method, needsKey((op as { security?: Array<Record<string, unknown>> }).security ?? contract.security)]),
    ),
  }));
}

/** Express middleware, mounted right before the validator. */
export function missingKey(openapiPath: string) {
  let routes: ReturnType<typeof bearerOnlyRoutes> = [];
  try {
    routes = bearerOnlyRoutes(readYamlFile(openapiPath) as Contract);
  } catch {
    // A contract that does not even parse: the validator reports it (server.ts's self-check).
  }
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (req.headers.authorization) return next();
    const path = req.originalUrl.split('?')[0];
    let found: { match: RegExpExecArray; methods: Map<string, boolean> } | undefined;
    for (const { pattern, methods } of routes) {
      const match = pattern.exec(path);
      if (!match) continue;
      // Two documented paths matching: which one the validator picks is its business.
      if (found) return next();
      found = { match, methods };
    }
    if (!found || found.methods.get(req.method.toLowerCase()) !== true) return next();
    try {
      found.match.slice(1).forEach((param) => decodeURIComponent(param));
    } catch {
      return next();
    }
    next(invalidApiKey());
  };
}
