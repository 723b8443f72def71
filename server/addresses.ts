/**
 * IP addresses and CIDR ranges for the network and region policies, the
 * configuration's address lists and the remote fetcher's public-address check, on
 * ipaddr.js (the parser Express's proxy-addr uses). IPv4-mapped IPv6 addresses
 * (`::ffff:192.0.2.1`, what a dual-stack socket reports) count as the IPv4
 * address they carry, for addresses and for ranges alike. Pure functions.
 */
import ipaddr from 'ipaddr.js';

export type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A range: a network address and its prefix length. */
export interface Range {
  address: Address;
  bits: number;
}

/** Strict textual forms only: dotted-quad IPv4 (not `1` or `0x7f.1`) or IPv6. */
function isAddressText(text: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(text) || (text.includes(':') && ipaddr.IPv6.isValid(text));
}

/** Parses an address, or returns undefined; an IPv4-mapped IPv6 address becomes IPv4. */
export function parseAddress(text: string): Address | undefined {
  const trimmed = text.trim();
  if (!isAddressText(trimmed)) return undefined;
  return ipaddr.process(trimmed);
}

/** Parses `address/bits` or a bare address (a range of one), or returns undefined. */
export function parseRange(text: string): Range | undefined {
  const [addressText, bitsText, extra] = text.trim().split('/');
  if (extra !== undefined || addressText === undefined || !isAddressText(addressText)) return undefined;
  const parsed = ipaddr.parse(addressText);
  const max = parsed.kind() === 'ipv4' ? 32 : 128;
  const bits = bitsText === undefined ? max : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : NaN;
  if (!(bits >= 0 && bits <= max)) return undefined;
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return { address: (parsed as ipaddr.IPv6).toIPv4Address(), bits: bits - 96 };
  }
  return { address: parsed, bits };
}

/** Whether a text is an address or a CIDR range. */
export function isAddressOrRange(text: string): boolean {
  return parseRange(text) !== undefined;
}

/** The range as it is stored and shown: `192.0.2.0/24`, `2001:db8::/32`. */
export function formatRange(range: Range): string {
  return `${range.address.toString()}/${range.bits}`;
}

export function inRange(address: Address, range: Range): boolean {
  if (address.kind() !== range.address.kind()) return false;
  return address.kind() === 'ipv4'
    ? (address as ipaddr.IPv4).match(range.address as ipaddr.IPv4, range.bits)
    : (address as ipaddr.IPv6).match(range.address as ipaddr.IPv6, range.bits);
}

/** The address's first `bits` bits as a lookup key (`4:192.0.2.0/24`), for indexes by prefix length. */
export function prefixKey(address: Address, bits: number): string {
  // Bytes past the prefix are zeroed (ipaddr.js 1.9 has no IPv6 network-address helper).
  const bytes = address.toByteArray().map((b, i) => {
    const keep = Math.min(8, Math.max(0, bits - 8 * i));
    return b & ((0xff << (8 - keep)) & 0xff);
  });
  return `${address.kind() === 'ipv4' ? 4 : 6}:${ipaddr.fromByteArray(bytes).toString()}/${bits}`;
}
