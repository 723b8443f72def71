/**
 * Regions of client addresses, from an operator-supplied file (`REGIONS_FILE`;
 * the reference server ships none). Format, one range per line:
 *
 *     # comment
 *     192.0.2.0/24      FR
 *     2001:db8::/32,    DE-BY
 *     198.51.100.7      US-CA
 *
 * a CIDR range (or one address) and a region code (letters, digits, `-`, `_`;
 * compared case-insensitively), separated by white space or a comma. The most
 * specific range wins. A bad line stops the start with its line number.
 */
import fs from 'node:fs';
import { parseAddress, parseRange, prefixKey, type Address } from '../../addresses.ts';

const REGION = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

/** A region code as stored and compared (upper case), or undefined when it is not one. */
export function regionCode(text: string): string | undefined {
  const trimmed = text.trim();
  return REGION.test(trimmed) ? trimmed.toUpperCase() : undefined;
}

export interface RegionMap {
  /** Number of ranges loaded. */
  readonly size: number;
  /** The region of an address, or undefined when no range holds it. */
  lookup(address: Address): string | undefined;
}

/** Builds the map from `[range, region]` lines (`source` names the file in messages). */
export function parseRegions(text: string, source: string): RegionMap {
  const byKey = new Map<string, string>();
  const lengths = { ipv4: new Set<number>(), ipv6: new Set<number>() };
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    const content = line.replace(/#.*/, '').trim();
    if (!content) continue;
    const [rangeText, regionText, ...rest] = content.split(/[\s,]+/);
    const range = parseRange(rangeText ?? '');
    const region = regionCode(regionText ?? '');
    if (!range || !region || rest.length > 0) {
      throw new Error(`${source}:${i + 1}: expected "CIDR REGION" (for example "192.0.2.0/24 FR"), got "${content}"`);
    }
    byKey.set(prefixKey(range.address, range.bits), region);
    lengths[range.address.kind()].add(range.bits);
  }
  const longestFirst = { ipv4: [...lengths.ipv4].sort((a, b) => b - a), ipv6: [...lengths.ipv6].sort((a, b) => b - a) };
  return {
    size: byKey.size,
    lookup(address) {
      for (const bits of longestFirst[address.kind()]) {
        const region = byKey.get(prefixKey(address, bits));
        if (region !== undefined) return region;
      }
      return undefined;
    },
  };
}

/** An empty map: every address is of unknown region. */
export const NO_REGIONS: RegionMap = { size: 0, lookup: () => undefined };

/** Reads the regions file, or the empty map when none is configured. */
export function loadRegions(file: string | undefined): RegionMap {
  if (!file) return NO_REGIONS;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`REGIONS_FILE ${file} could not be read: ${(error as Error).message}`);
  }
  return parseRegions(text, `REGIONS_FILE ${file}`);
}

/** The region of an address text, for tests and diagnostics. */
export function regionOf(map: RegionMap, addressText: string): string | undefined {
  const address = parseAddress(addressText);
  return address ? map.lookup(address) : undefined;
}
