/**
 * The absolute base of signed output URLs. Configured
 * (`PUBLIC_BASE_URL`), or else built from the request — but never from an
 * unchecked `Host`: a client could otherwise have the server sign links to
 * `http://evil.example/files/…`, or to `http://a"b/…`, which is not even a URI.
 *
 * The rule without PUBLIC_BASE_URL: the `Host` header is used only when it is a
 * plain URI authority (a DNS name, an IPv4 address or a bracketed IPv6 address,
 * and an optional port 1–65535; nothing else) whose name is allowed —
 * `ALLOWED_HOSTS` when set (Django's form: `api.example.com`, `.example.com` for
 * a domain and its subdomains, `*` for any valid name), by default the names this
 * server is reachable as on this machine (loopback names, the bound `HOST`, and
 * for a wildcard bind the machine's interface addresses and host name). Any other
 * `Host` gives way to the address and port this connection reached. The scheme
 * is the request's (`X-Forwarded-Proto` only through `TRUST_PROXY`), and only
 * `http` or `https`. `X-Forwarded-Host` is not used: behind a proxy that rewrites
 * the host, set PUBLIC_BASE_URL.
 */
import net from 'node:net';
import os from 'node:os';
import type { Request } from 'express';
import { parseAuthority } from '../authority.ts';

export interface BaseUrlConfig {
  /** Bound interface (`HOST`). */
  host: string;
  publicBaseUrl: string | undefined;
  /** `ALLOWED_HOSTS` entries; empty: the machine's own names. */
  allowedHosts: string[];
}

const WILDCARDS = new Set(['0.0.0.0', '::', '']);

/** The names this server answers as on this machine, for when ALLOWED_HOSTS is unset. */
function machineNames(boundHost: string): string[] {
  const names = ['localhost', '127.0.0.1', '[::1]'];
  if (!WILDCARDS.has(boundHost)) return [...names, net.isIPv6(boundHost) ? `[${boundHost.toLowerCase()}]` : boundHost.toLowerCase()];
  names.push(os.hostname().toLowerCase());
  for (const addresses of Object.values(os.networkInterfaces())) {
    for (const a of addresses ?? []) names.push(a.family === 'IPv6' ? `[${a.address.toLowerCase()}]` : a.address);
  }
  return names;
}

/** Whether `name` (as parseAuthority gives it) is on the allow list. */
function allowedBy(entries: string[]): (name: string) => boolean {
  if (entries.includes('*')) return () => true;
  const exact = new Set(entries.filter((e) => !e.startsWith('.')));
  const domains = entries.filter((e) => e.startsWith('.'));
  return (name) => exact.has(name) || domains.some((d) => name === d.slice(1) || name.endsWith(d));
}

/** This connection's own address and port, as a URL authority. */
function localAuthority(req: Request): string {
  let address = req.socket.localAddress ?? '127.0.0.1';
  if (address.startsWith('::ffff:') && net.isIPv4(address.slice(7))) address = address.slice(7);
  return `${net.isIPv6(address) ? `[${address}]` : address}:${req.socket.localPort}`;
}

/** Remembered answers per Host header (a task read signs on every call); bounded. */
const MAX_REMEMBERED = 1024;

/** Builds the function that gives a request's base for signed links (see the header). */
export function baseUrlFor(config: BaseUrlConfig): (req: Request) => string {
  const configured = config.publicBaseUrl;
  if (configured !== undefined) return () => configured;
  const allowed = allowedBy(config.allowedHosts.length > 0 ? config.allowedHosts : machineNames(config.host));
  const hosts = new Map<string, string | null>();
  /** The authority to use for this Host header, or null when it must not be used. */
  const checked = (host: string): string | null => {
    let answer = hosts.get(host);
    if (answer === undefined) {
      const parsed = parseAuthority(host);
      answer = parsed && allowed(parsed.name) ? `${parsed.name}${parsed.port === undefined ? '' : `:${parsed.port}`}` : null;
      if (hosts.size >= MAX_REMEMBERED) hosts.clear();
      hosts.set(host, answer);
    }
    return answer;
  };
  return (req) => {
    const scheme = req.protocol === 'https' || req.protocol === 'http' ? req.protocol : 'encrypted' in req.socket ? 'https' : 'http';
    const host = req.headers.host;
    return `${scheme}://${(host !== undefined && checked(host)) || localAuthority(req)}`;
  };
}
