/**
 * Fetching a URL an upstream gave us (an output's address), only where the
 * public internet is: http(s), and an address that is not loopback, private,
 * link-local (cloud metadata at 169.254.169.254), CGNAT, unique-local,
 * multicast or reserved, unless the operator allowed it (`REMOTE_FETCH_ALLOW`,
 * a self-hosted upstream on a private network). Without this an upstream
 * could make the server fetch `http://127.0.0.1/...` and hand the answer back
 * to a client through a signed link.
 *
 * The address is checked after DNS resolution, inside the connection's own
 * lookup, and the connection goes to exactly the address checked (no second
 * resolution an attacker's DNS could answer differently). Redirects are
 * followed here, at most three, each checked the same way; an `Authorization`
 * header is not carried to another origin.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import ipaddr from 'ipaddr.js';
import { inRange, parseAddress, parseRange, type Address, type Range } from '../../addresses.ts';

const MAX_REDIRECTS = 3;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 204, 205, 304]);

/** What may be fetched besides public addresses: host names as given, and address ranges. */
export interface FetchAllow {
  hosts: ReadonlySet<string>;
  ranges: readonly Range[];
}

/** The allow-list from `REMOTE_FETCH_ALLOW` entries (already checked by the config). */
export function fetchAllowOf(entries: readonly string[]): FetchAllow {
  const ranges: Range[] = [];
  const hosts = new Set<string>();
  for (const entry of entries) {
    const range = parseRange(entry);
    if (range) ranges.push(range);
    else hosts.add(entry.toLowerCase());
  }
  return { hosts, ranges };
}

/** An address or redirect this server does not fetch; the message is safe to show. */
export class AddressRefused extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'AddressRefused';
  }
}

/** Whether an address is public (ipaddr.js's `unicast`) or in an allowed range. */
export function addressAllowed(address: Address, allow: FetchAllow): boolean {
  if (allow.ranges.some((range) => inRange(address, range))) return true;
  return address.range() === 'unicast';
}

function checkAddress(text: string, allow: FetchAllow): void {
  const address = parseAddress(text);
  if (!address) throw new AddressRefused(`${text} is not an address it can check`);
  if (!addressAllowed(address, allow)) throw new AddressRefused(`${text} is a ${address.range()} address`);
}

/** A lookup that resolves, refuses any non-public answer, and hands the connection only the addresses it checked. */
function checkedLookup(allow: FetchAllow): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { all: true, family: options.family ?? 0, hints: options.hints ?? 0 }, (error, addresses) => {
      if (error) return void (callback as (e: Error) => void)(error);
      try {
        for (const a of addresses) checkAddress(a.address, allow);
      } catch (refused) {
        return void (callback as (e: Error) => void)(refused as Error);
      }
      if (addresses.length === 0) return void (callback as (e: Error) => void)(new AddressRefused(`no address for ${hostname}`));
      if (options.all) (callback as (e: null, a: dns.LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** One request, no redirect followed: the connection goes only to a checked address. */
function requestOnce(url: URL, headers: Record<string, string>, signal: AbortSignal | undefined, allow: FetchAllow): Promise<http.IncomingMessage> {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const listed = allow.hosts.has(host);
  const literal = ipaddr.isValid(host);
  // A literal address is never looked up: it is checked here. A listed host name is the operator's word.
  if (literal && !listed) checkAddress(host, allow);
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(url, { method: 'GET', headers, signal, ...(!listed && !literal && { lookup: checkedLookup(allow) }) }, resolve);
    request.on('error', reject); // every error: an abort after the answer must not go unhandled
    request.end();
  });
}

/** A Node response as a fetch Response (status, headers, the body as a web stream). */
function toResponse(res: http.IncomingMessage): Response {
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  const status = res.statusCode ?? 502;
  const body = NULL_BODY.has(status) ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>);
  if (!body) res.resume();
  return new Response(body, { status, statusText: res.statusMessage ?? '', headers });
}

/**
 * GETs `url` as fetch would, but only from public (or allowed) addresses,
 * checked after resolution and at each of at most three redirects. Throws
 * AddressRefused for a refused scheme, address or redirect; network errors
 * as they come (with their `code`).
 */
export async function fetchPublic(url: URL, init: { headers?: Record<string, string>; signal?: AbortSignal }, allow: FetchAllow): Promise<Response> {
  let current = url;
  let headers = { ...init.headers };
  for (let hop = 0; ; hop++) {
    if (current.protocol !== 'http:' && current.protocol !== 'https:') throw new AddressRefused(`a redirect leads to a ${current.protocol} address`);
    const res = await requestOnce(current, headers, init.signal, allow);
    const location = res.headers.location;
    if (!REDIRECTS.has(res.statusCode ?? 0) || !location) return toResponse(res);
    res.destroy();
    if (hop >= MAX_REDIRECTS) throw new AddressRefused(`it redirects more than ${MAX_REDIRECTS} times`);
    const next = new URL(location, current);
    // Credentials meant for the upstream do not travel to another origin.
    if (next.origin !== current.origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'authorization'));
    current = next;
  }
}
