/**
 * Network blocks and regional restrictions, checked right after the key (from
 * the bearer security handler), on every operation:
 * - `403 NETWORK_BLOCKED`: the client address is in the account's deny list, or
 *   the account has an allow list and the address is in none of its ranges;
 * - `403 REGION_BLOCKED`: the address's region (REGIONS_FILE) is one the
 *   account blocks, or it has no known region and the account blocks unknown
 *   regions (without a regions file every region is unknown).
 * An account with no such settings costs nothing: no address is even parsed.
 */
import { DomainError } from '../errors.ts';
import type { AccountPolicyColumns } from '../../storage/accounts.ts';
import { inRange, parseAddress, parseRange, type Address, type Range } from '../../addresses.ts';
import type { RegionMap } from './regions.ts';
import { listOf } from './settings.ts';

// Parsed lists by their stored JSON text: an account's lists are parsed once, not per request.
const parsed = new Map<string, Range[]>();
const MAX_CACHED = 1000;

function rangesOf(column: string | null): Range[] {
  if (!column) return [];
  let ranges = parsed.get(column);
  if (!ranges) {
    ranges = listOf(column).flatMap((text) => parseRange(text) ?? []);
    if (parsed.size >= MAX_CACHED) parsed.clear();
    parsed.set(column, ranges);
  }
  return ranges;
}

const networkBlocked = () => new DomainError('NETWORK_BLOCKED', 'Requests from this network address are not allowed for this account.');
const regionBlocked = () => new DomainError('REGION_BLOCKED', 'Requests from this region are not allowed for this account.');

function checkNetwork(account: AccountPolicyColumns, address: Address | undefined): void {
  const deny = rangesOf(account.network_deny);
  const allow = rangesOf(account.network_allow);
  if (address && deny.some((r) => inRange(address, r))) throw networkBlocked();
  if (allow.length > 0 && !(address && allow.some((r) => inRange(address, r)))) throw networkBlocked();
}

function checkRegion(account: AccountPolicyColumns, address: Address | undefined, regions: RegionMap): void {
  const region = address ? regions.lookup(address) : undefined;
  if (region === undefined) {
    if (account.unknown_region === 'block') throw regionBlocked();
    return;
  }
  if (listOf(account.blocked_regions).includes(region)) throw regionBlocked();
}

/**
 * Throws the account's network or region refusal for a client address (as the socket or a trusted proxy gave it).
 * The address is asked for only when the account has such settings: Express's `req.ip` walks the forwarding
 * chain through proxy-addr on every call, about a hundredth of a task read's CPU for accounts that never need it.
 */
export function checkAccess(account: AccountPolicyColumns, clientAddress: () => string | undefined, regions: RegionMap): void {
  const hasNetwork = Boolean(account.network_allow || account.network_deny);
  const hasRegions = Boolean(account.blocked_regions) || account.unknown_region === 'block';
  if (!hasNetwork && !hasRegions) return;
  const text = clientAddress();
  const address = text === undefined ? undefined : parseAddress(text);
  if (hasNetwork) checkNetwork(account, address);
  if (hasRegions) checkRegion(account, address, regions);
}
