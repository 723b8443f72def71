/**
 * An account as its owner and operator see it: its money picture in the current
 * UTC month and each key's spend (charges plus outstanding reservations, what a
 * key's cap limits). `gemforge admin account show` and the console's account and
 * key views both start from it.
 */
import type { Db } from '../storage/db.ts';
import type { Clock } from './clock.ts';
import { describeKey, listKeys, requireAccount } from './accounts.ts';
import { accountSummary } from './ledger.ts';

export async function accountOverview(db: Db, clock: Clock, id: string) {
  const account = await requireAccount(db, id);
  const keys = await listKeys(db, id);
  const summary = await accountSummary(db, clock, id, keys.map((k) => k.id));
  return {
    account,
    summary,
    /** The fields both views show, in this order. */
    fields: {
      id: account.id,
      name: account.name,
      state: account.state,
      balance: summary.balance,
      llmAllowance: account.llm_allowance,
      llmAllowanceUsed: summary.llmAllowanceUsed,
      paidConsent: account.paid_consent,
      month: summary.month,
    },
    keys: keys.map((k) => ({ ...describeKey(k), spendThisMonth: summary.keySpendThisMonth[k.id] ?? 0 })),
  };
}
