/**
 * An account's policy settings as the admin CLI sets and shows them. They are
 * columns of the account row (storage/accounts.ts), lists as JSON text, so the
 * row authentication loads already carries them.
 */
import type { AccountPolicyColumns } from '../../storage/accounts.ts';
import { CONTENT_PREFERENCES, type ContentPreference } from '../../providers/moderation/types.ts';
import { formatRange, parseRange } from '../../addresses.ts';
import { regionCode } from './regions.ts';
import { DomainError } from '../errors.ts';

// A policy setting the operator gave that is not valid throws INVALID_SETTING (the admin CLI prints it and exits 2).

export type UnknownRegionRule = 'allow' | 'block';

/** What `gemforge admin account update` may change; a list replaces the stored one ([] clears it). */
export interface PolicyPatch {
  contentPreference?: string | undefined;
  networkAllow?: string[] | undefined;
  networkDeny?: string[] | undefined;
  blockedRegions?: string[] | undefined;
  unknownRegion?: string | undefined;
}

/** The settings of a new account: standard content, every network and region. */
export const DEFAULT_POLICY_COLUMNS: AccountPolicyColumns = {
  content_preference: 'standard',
  network_allow: null,
  network_deny: null,
  blocked_regions: null,
  unknown_region: 'allow',
  moderation_blocked_at: null,
};

function ranges(list: string[], flag: string): string | null {
  const out = list.map((text) => {
    const range = parseRange(text);
    if (!range) throw new DomainError('INVALID_SETTING', `${flag}: "${text}" is not an IPv4 or IPv6 address or CIDR range`);
    return formatRange(range);
  });
  return out.length ? JSON.stringify([...new Set(out)]) : null;
}

function regions(list: string[]): string | null {
  const out = list.map((text) => {
    const code = regionCode(text);
    if (!code) throw new DomainError('INVALID_SETTING', `--blocked-regions: "${text}" is not a region code (letters, digits, - and _)`);
    return code;
  });
  return out.length ? JSON.stringify([...new Set(out)]) : null;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if (!allowed.includes(value as T)) throw new DomainError('INVALID_SETTING', `${flag} must be one of ${allowed.join(', ')}`);
  return value as T;
}

/** The column values of a patch, validated and normalised (ranges canonical, regions upper case). */
export function policyColumns(patch: PolicyPatch): Partial<AccountPolicyColumns> {
  return {
    ...(patch.contentPreference !== undefined && {
      content_preference: oneOf(patch.contentPreference, CONTENT_PREFERENCES, '--content-preference'),
    }),
    ...(patch.networkAllow !== undefined && { network_allow: ranges(patch.networkAllow, '--network-allow') }),
    ...(patch.networkDeny !== undefined && { network_deny: ranges(patch.networkDeny, '--network-deny') }),
    ...(patch.blockedRegions !== undefined && { blocked_regions: regions(patch.blockedRegions) }),
    ...(patch.unknownRegion !== undefined && {
      unknown_region: oneOf<UnknownRegionRule>(patch.unknownRegion, ['allow', 'block'], '--unknown-region'),
    }),
  };
}

/** A JSON list column as a list (null: empty). */
export function listOf(column: string | null): string[] {
  return column ? (JSON.parse(column) as string[]) : [];
}

/** The settings as `gemforge admin account show` prints them. */
export function describePolicies(account: AccountPolicyColumns) {
  return {
    contentPreference: account.content_preference as ContentPreference,
    network: { allow: listOf(account.network_allow), deny: listOf(account.network_deny) },
    regions: { blocked: listOf(account.blocked_regions), unknown: account.unknown_region },
    moderationBlockedAt: account.moderation_blocked_at,
  };
}
