/**
 * A URI authority as the signed links accept it from a `Host` header (a DNS
 * name, an IPv4 address or a bracketed IPv6 address, and an optional port), and
 * the `ALLOWED_HOSTS` entries checked against the same grammar. Pure functions
 * below configuration and HTTP alike: config.ts checks the entries at start,
 * http/base-url.ts reads each request's `Host` with them.
 */
import net from 'node:net';

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
/** A DNS name (with an optional trailing dot), a bracketed IPv6 address; then an optional port. */
const AUTHORITY = new RegExp(`^(?:(${LABEL}(?:\\.${LABEL})*\\.?)|\\[([0-9a-f:.]{2,45})\\])(?::([0-9]{1,5}))?$`, 'i');

/** The host name and port of a valid URI authority, or undefined. */
export function parseAuthority(value: string): { name: string; port: number | undefined } | undefined {
  if (value.length === 0 || value.length > 260) return undefined;
  const match = AUTHORITY.exec(value);
  if (!match) return undefined;
  const [, dns, ipv6, portText] = match;
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  if (ipv6 !== undefined) return net.isIPv6(ipv6) ? { name: `[${ipv6.toLowerCase()}]`, port } : undefined;
  const name = dns.toLowerCase().replace(/\.$/, '');
  if (name.length > 253) return undefined;
  // A name whose last label is a number is an IPv4 address to a URL parser (WHATWG's
  // "ends in a number"): it must be a valid dotted-quad one (`a.0`, `1.2.3` are not).
  if (/^(?:[0-9]+|0x[0-9a-f]*)$/.test(name.slice(name.lastIndexOf('.') + 1)) && !net.isIPv4(name)) return undefined;
  return { name, port };
}

/** How an `ALLOWED_HOSTS` entry reads; throws on one that is not a host name, `.domain` or `*`. */
export function checkAllowedHost(entry: string): string {
  const e = entry.trim().toLowerCase();
  if (e === '*') return e;
  const name = e.startsWith('.') ? e.slice(1) : e;
  const parsed = parseAuthority(name);
  if (!parsed || parsed.port !== undefined) {
    throw new Error(`ALLOWED_HOSTS must list host names (api.example.com), domains (.example.com) or *, without ports; got "${entry}"`);
  }
  return e.startsWith('.') ? `.${parsed.name}` : parsed.name;
}
