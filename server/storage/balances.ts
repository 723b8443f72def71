/**
 * The running figures beside the ledger (migration 006): read in a constant number
 * of rows at admission, moved in the same transaction as the ledger rows, and
 * recomputable from those rows at any time (`recomputed*`, used by the migration's
 * fill and by `admin ledger verify`).
 *
 *   account_balances  credited, paid_pending, paid_posted, allowance_pending
 *   account_months    (account, UTC month) → allowance_posted, paid_posted
 *   key_balances      pending (held by the key's open reservations, any month)
 *   key_months        (key, UTC month) → posted
 *   account_days      (account, UTC day, kind) → posted (migration 016: the console's usage chart)
 *
 * Paid balance = credited − paid_pending − paid_posted. A key's spend in a month
 * (spec Authentication 9) = key_months.posted + key_balances.pending. The LLM
 * allowance used in a month = account_months.allowance_posted + allowance_pending.
 *
 * Locking: on Postgres a reservation locks the account's balance row
 * (`FOR UPDATE`) and only then reads the figures, so the read sees every
 * settlement committed before it. Every movement updates the account's row
 * first, then its month, then the key's rows (`move`), so the month rows and the
 * key's rows only change under the account row's lock: that one lock guards them
 * all. SQLite's single writer serializes all of it.
 *
 * A media hold can instead be decided by the database as the transaction commits
 * (`guardHold`): one conditional UPDATE per balance row, waiting with the
 * transaction's other writes for its COMMIT (engine/pg-deferred.ts), so the account's
 * row is locked only while Postgres runs that batch, never across a round trip; on
 * SQLite the same moves, guarded (migration 020), save the figures' read.
 *
 * Other rows of the account a transaction locks come after its balance row,
 * whichever way the hold is decided: its rate buckets (the admission's tokens,
 * rate-buckets.ts `guardTokens`, on the first way only), then its queue turn row
 * (migration 017, locked by the trigger of the job's insert, jobs.ts `enqueue`),
 * each `last` in the batch, after the guards, in that order. A submission
 * refused at the commit runs again the long way, balance row first
 * (`lockFigures`); had the at-commit batch taken the turn row
 * before the guards, the two orders deadlocked between two submissions of one
 * account (each costing deadlock_timeout and a retry). Settlements take the
 * balance row before the job's change of state (tasks.ts `operatorSettle`); a
 * claim or a job handed back takes the turn row with no balance row at all.
 */
import type { Knex } from 'knex';
import { isSqlite } from './db.ts';
import { guardRefusal, query, statement, type Conn, type Value } from './engine/query.ts';

/** What a reservation needs to decide, read in one statement. */
export interface Figures {
  /** Paid Gems available: credited − paid held − paid charged. */
  balance: number;
  llmAllowance: number;
  paidConsent: boolean;
  /** LLM allowance used this month: charged this month plus held (any month). */
  allowanceUsed: number;
  /** The key's monthly cap (null: none), or null when there is no key. */
  keyCap: number | null;
  /** The key's spend this month: charged this month plus held (any month). */
  keySpent: number;
}

/** A movement of the running figures; every field defaults to 0. */
export interface Movement {
  accountId: string;
  keyId: string | null;
  month: string;
  credited?: number;
  paidPending?: number;
  allowancePending?: number;
  paidPosted?: number;
  allowancePosted?: number;
  /** The UTC day (YYYY-MM-DD) and kind a charge counts under in account_days; a movement that posts names both. */
  day?: string;
  kind?: string;
}

const num = (v: unknown): number => Number(v ?? 0);

const accountRowCreate = statement.write('account-balance-create', (c, account) =>
  c('account_balances').insert({ account_id: account }).onConflict('account_id').ignore(),
);
const keyRowCreate = statement.write('key-balance-create', (c, key) => c('key_balances').insert({ key_id: key }).onConflict('key_id').ignore());

/** Creates the balance rows of an account and key that have none yet (their first movement). */
async function ensureRows(db: Conn, accountId: string, keyId: string | null): Promise<void> {
  await query(db, accountRowCreate, [accountId]);
  if (keyId) await query(db, keyRowCreate, [keyId]);
}

/**
 * A new key's balance row, made in the transaction that creates the key (domain
 * accounts.ts `createKey`): without it the at-commit guard (`guardHold`) finds no
 * row to move and refuses, and the key's first holds all go the long way
 * (`lockFigures`, which still makes a missing row for keys older than this).
 */
export async function createKeyRow(db: Conn, keyId: string): Promise<void> {
  await query(db, keyRowCreate, [keyId]);
}

const accountRowLock = statement.rows('account-balance-lock', (c, account) =>
  c('account_balances as ab').where('ab.account_id', account).forUpdate('ab').select('ab.account_id'),
);
const rowsLock = statement.rows('account-key-balance-lock', (c, account, key) =>
  c('account_balances as ab')
    .where('ab.account_id', account)
    .forUpdate('ab')
    .join('key_balances as kb', (j) => j.onVal('kb.key_id', key))
    .select('ab.account_id'),
);

/**
 * Postgres: locks the account's balance row (which guards the key's rows too, see
 * above); false when it or the key's row is missing.
 */
async function lockRows(trx: Knex.Transaction, accountId: string, keyId: string | null): Promise<boolean> {
  const rows = keyId ? await query(trx, rowsLock, [accountId, keyId]) : await query(trx, accountRowLock, [accountId]);
  return rows.length > 0;
}

function figuresQuery(db: Conn, accountId: Value, keyId: Value, month: Value) {
  const q = db('account_balances as ab')
    .join('accounts as a', 'a.id', 'ab.account_id')
    .leftJoin('account_months as am', (j) => j.on('am.account_id', 'ab.account_id').andOnVal('am.month', month))
    .where('ab.account_id', accountId)
    .select('ab.credited', 'ab.paid_pending', 'ab.paid_posted', 'ab.allowance_pending', 'a.llm_allowance', 'a.paid_consent', 'am.allowance_posted');
  if (!keyId) return q;
  return q
    .join('key_balances as kb', (j) => j.onVal('kb.key_id', keyId))
    .join('api_keys as k', 'k.id', 'kb.key_id')
    .leftJoin('key_months as km', (j) => j.on('km.key_id', 'kb.key_id').andOnVal('km.month', month))
    .select('kb.pending', 'k.monthly_cap', 'km.posted');
}

const figuresOfKey = statement.first('figures:key', (c, a, k, m) => figuresQuery(c, a, k, m).limit(1));
const figuresOfAccount = statement.first('figures', (c, a, m) => figuresQuery(c, a, null, m).limit(1));

/**
 * The figures an admission decides on, under the rows' locks for the rest of the
 * transaction: a constant number of statements whatever the account's history.
 */
export async function lockFigures(trx: Knex.Transaction, accountId: string, keyId: string | null, month: string): Promise<Figures | undefined> {
  const pg = !isSqlite(trx);
  if (pg && !(await lockRows(trx, accountId, keyId))) {
    await ensureRows(trx, accountId, keyId);
    await lockRows(trx, accountId, keyId);
  }
  const read = () => (keyId ? query(trx, figuresOfKey, [accountId, keyId, month]) : query(trx, figuresOfAccount, [accountId, month]));
  let row = await read();
  if (!row && !pg) {
    await ensureRows(trx, accountId, keyId);
    row = await read();
  }
  if (!row) return undefined;
  return {
    balance: num(row.credited) - num(row.paid_pending) - num(row.paid_posted),
    llmAllowance: num(row.llm_allowance),
    paidConsent: Boolean(row.paid_consent),
    allowanceUsed: num(row.allowance_posted) + num(row.allowance_pending),
    keyCap: keyId && row.monthly_cap !== null && row.monthly_cap !== undefined ? num(row.monthly_cap) : null,
    keySpent: keyId ? num(row.posted) + num(row.pending) : 0,
  };
}

/** Adds `value` to a column, as SQL (so concurrent movements never lose one another). */
const plus = (db: Conn, column: string, value: Value) => db.raw('?? + ?', [column, value]);

/** The account row's move: each figure plus its amount. */
const accountMove = (c: Conn, account: Value, cr: Value, pp: Value, po: Value, ap: Value) =>
  c('account_balances')
    .where({ account_id: account })
    .update({
      credited: plus(c, 'credited', cr),
      paid_pending: plus(c, 'paid_pending', pp),
      paid_posted: plus(c, 'paid_posted', po),
      allowance_pending: plus(c, 'allowance_pending', ap),
    });
const keyMove = (c: Conn, key: Value, p: Value) =>
  c('key_balances')
    .where({ key_id: key })
    .update({ pending: plus(c, 'pending', p) });
// One name each, whether the move waits (`later`) or is checked (`write`): the same SQL.
const accountMoveLater = statement.later('account-balance-move', (c, ...v) => accountMove(c, v[0]!, v[1]!, v[2]!, v[3]!, v[4]!));
const accountMoveNow = statement.write('account-balance-move', accountMoveLater.build);
const keyMoveLater = statement.later('key-balance-move', (c, key, p) => keyMove(c, key, p));
const keyMoveNow = statement.write('key-balance-move', keyMoveLater.build);

// The month and day rows are upserts whose outcome nobody reads: they wait for the
// transaction's next statement (its COMMIT at the latest) instead of a round trip each.
const accountMonthMove = statement.later('account-month-move', (c, account, month, allowance, paid) =>
  c('account_months')
    .insert({ account_id: account, month, allowance_posted: allowance, paid_posted: paid })
    .onConflict(['account_id', 'month'])
    .merge({
      allowance_posted: c.raw('?? + ?', ['account_months.allowance_posted', allowance]),
      paid_posted: c.raw('?? + ?', ['account_months.paid_posted', paid]),
    }),
);
const accountDayMove = statement.later('account-day-move', (c, account, day, kind, posted) =>
  c('account_days')
    .insert({ account_id: account, day, kind, posted })
    .onConflict(['account_id', 'day', 'kind'])
    .merge({ posted: c.raw('?? + ?', ['account_days.posted', posted]) }),
);
const keyMonthMove = statement.later('key-month-move', (c, key, month, posted) =>
  c('key_months')
    .insert({ key_id: key, month, posted })
    .onConflict(['key_id', 'month'])
    .merge({ posted: c.raw('?? + ?', ['key_months.posted', posted]) }),
);

/**
 * Applies a movement to the running figures: the account row, then its month,
 * then the key row, then its month (the lock order). Run it in the transaction
 * that appends the ledger rows it mirrors. `figuresRead`: the balance rows are
 * known to exist (the transaction read them with `lockFigures`, or it settles a
 * held reservation, whose hold moved them and so made them: balance rows are
 * never deleted but by `fillBalances`, which makes every one again), and the
 * balance rows' moves may wait to go with its next statement
 * (engine/compiled.ts `executeLater`) instead of each being checked to change
 * one row. The month and day rows always wait (upserts: they cannot miss).
 */
export async function move(trx: Knex.Transaction, m: Movement, figuresRead = false): Promise<void> {
  const [credited, paidPending, allowancePending, paidPosted, allowancePosted] = [
    m.credited ?? 0,
    m.paidPending ?? 0,
    m.allowancePending ?? 0,
    m.paidPosted ?? 0,
    m.allowancePosted ?? 0,
  ];
  const accountParams = [m.accountId, credited, paidPending, paidPosted, allowancePending];
  if (figuresRead) await query(trx, accountMoveLater, accountParams);
  else if ((await query(trx, accountMoveNow, accountParams)).changes !== 1) throw new Error(`balances: account ${m.accountId} has no balance row`);
  if (paidPosted || allowancePosted) {
    await query(trx, accountMonthMove, [m.accountId, m.month, allowancePosted, paidPosted]);
    if (!m.day || !m.kind) throw new Error('balances: a charge needs its day and kind');
    await query(trx, accountDayMove, [m.accountId, m.day, m.kind, allowancePosted + paidPosted]);
  }
  if (!m.keyId) return;
  const pending = paidPending + allowancePending;
  const posted = paidPosted + allowancePosted;
  if (pending && figuresRead) await query(trx, keyMoveLater, [m.keyId, pending]);
  else if (pending && (await query(trx, keyMoveNow, [m.keyId, pending])).changes !== 1) throw new Error(`balances: key ${m.keyId} has no balance row`);
  if (posted) await query(trx, keyMonthMove, [m.keyId, m.month, posted]);
}

/** What `guardHold` holds: paid Gems of the account's balance, counted against the key's cap. */
export interface GuardedHold {
  accountId: string;
  keyId: string | null;
  month: string;
  paid: number;
}

/** What the guards of `guardHold` say when they refuse (`gemforge_guard`, migration 011). */
const HOLD_GUARDS = new Set(['account balance', 'key cap']);

/** True when a transaction failed because a `guardHold` was refused (not another guard: engine/query.ts `guardRefusal`). */
export const isHoldRefused = (error: unknown): boolean => HOLD_GUARDS.has(guardRefusal(error) ?? '');

// The rules of ledger.ts `reserveTx` for a media hold, as conditions of the moves themselves: the
// account's paid balance covers it; the key has no cap, or a cap above 0 that its month's spend plus
// this hold stays within. The key's statement runs after the account's (its own snapshot, under the
// account row's lock), so the month row it reads is current.
const accountGuard = statement.later(
  'account-guarded-hold',
  (c, account, paid) =>
    c.raw(
      `WITH held AS (UPDATE account_balances SET paid_pending = paid_pending + ? WHERE account_id = ? AND credited - paid_pending - paid_posted >= ? RETURNING 1)
     SELECT gemforge_guard(count(*) = 1, 'account balance') FROM held`,
      [paid, account, paid],
    ),
  { last: true },
); // last before the COMMIT: the account's row is locked from its statement to the end of the batch
const keyGuard = statement.later(
  'key-guarded-hold',
  (c, key, month, paid) =>
    c.raw(
      `WITH held AS (UPDATE key_balances AS kb SET pending = kb.pending + ?
       FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = ?
       WHERE kb.key_id = ? AND k.id = kb.key_id AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND kb.pending + COALESCE(km.posted, 0) + ? <= k.monthly_cap))
       RETURNING 1)
     SELECT gemforge_guard(count(*) = 1, 'key cap') FROM held`,
      [paid, month, key, paid],
    ),
  { last: true },
);

// The same rules on SQLite, as guarded writes (engine/query.ts, migration 020's guards): each waits with the
// transaction's other writes and fails their batch unless it moved its one row. The single writer orders them.
const accountGuardSqlite = statement.guarded('account-guarded-hold:sqlite', 'account balance', (c, account, paid) =>
  c.raw(`UPDATE account_balances SET paid_pending = paid_pending + ? WHERE account_id = ? AND credited - paid_pending - paid_posted >= ?`, [
    paid,
    account,
    paid,
  ]),
);
const keyGuardSqlite = statement.guarded('key-guarded-hold:sqlite', 'key cap', (c, key, month, paid) =>
  c.raw(
    `UPDATE key_balances SET pending = pending + ?
     WHERE key_id = ? AND EXISTS (SELECT 1 FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = ?
       WHERE k.id = key_balances.key_id AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND key_balances.pending + COALESCE(km.posted, 0) + ? <= k.monthly_cap)))`,
    [paid, key, month, paid],
  ),
);

/**
 * Holds `paid` Gems by conditional moves that wait for the COMMIT (engine/compiled.ts
 * `executeLater` on Postgres, `executeGuarded` on SQLite), instead of locking and
 * reading the figures first: the moves `move` would make for this hold, each
 * refusing (`isHoldRefused`) when a rule does not hold, which fails the commit (on
 * SQLite, the batch the moves leave in) with nothing kept. The caller then decides
 * again with `lockFigures`, which says which rule it was.
 */
export async function guardHold(trx: Knex.Transaction, h: GuardedHold): Promise<boolean> {
  const sqlite = isSqlite(trx);
  await query(trx, sqlite ? accountGuardSqlite : accountGuard, [h.accountId, h.paid]);
  if (h.keyId) await query(trx, sqlite ? keyGuardSqlite : keyGuard, [h.keyId, h.month, h.paid]);
  return true;
}

/** Locks (Postgres) and reads an account's paid balance, creating its row on first use. */
export async function lockBalance(trx: Knex.Transaction, accountId: string): Promise<number> {
  const figures = await lockFigures(trx, accountId, null, '');
  if (!figures) throw new Error(`balances: unknown account ${accountId}`);
  return figures.balance;
}

const storedAccountFigures = statement.first('account-figures', (c, account, month) =>
  c('account_balances as ab')
    .leftJoin('account_months as am', (j) => j.on('am.account_id', 'ab.account_id').andOnVal('am.month', month))
    .where('ab.account_id', account)
    .select('ab.*', 'am.allowance_posted as month_allowance_posted')
    .first(),
);

/** An account's stored figures (zeros before its first movement). */
export async function accountBalance(db: Conn, accountId: string, month: string) {
  const row = await query(db, storedAccountFigures, [accountId, month]);
  return {
    balance: num(row?.credited) - num(row?.paid_pending) - num(row?.paid_posted),
    allowanceUsed: num(row?.month_allowance_posted) + num(row?.allowance_pending),
  };
}

const storedKeyFigures = statement.first('key-figures', (c, key, month) =>
  c('key_balances as kb')
    .leftJoin('key_months as km', (j) => j.on('km.key_id', 'kb.key_id').andOnVal('km.month', month))
    .where('kb.key_id', key)
    .select('kb.pending', 'km.posted')
    .first(),
);

/** A key's spend in a UTC month from the stored figures: charged that month plus held. */
export async function keySpent(db: Conn, keyId: string, month: string): Promise<number> {
  const row = await query(db, storedKeyFigures, [keyId, month]);
  return num(row?.pending) + num(row?.posted);
}

// ---- Recomputed from the ledger rows (the source of truth) ----------------------

/** `SUM(±column)` by entry type, named `alias`. */
const signed = (db: Conn, column: string, sign: { hold: number; post: number; void: number; credit: number }, alias: string) =>
  db.raw(
    `COALESCE(SUM(CASE type WHEN 'hold' THEN ${sign.hold} * ?? WHEN 'post' THEN ${sign.post} * ?? WHEN 'void' THEN ${sign.void} * ?? WHEN 'credit' THEN ${sign.credit} * ?? ELSE 0 END), 0) AS ??`,
    [column, column, column, column, alias],
  );
const PENDING = { hold: 1, post: -1, void: -1, credit: 0 };
const POSTED = { hold: 0, post: 1, void: 0, credit: 0 };
const CREDITED = { hold: 0, post: 0, void: 0, credit: 1 };

/** Per account, from the ledger entries: the account_balances columns. */
export function recomputedAccounts(db: Conn) {
  return db('ledger_entries')
    .groupBy('account_id')
    .select(
      'account_id',
      signed(db, 'paid', CREDITED, 'credited'),
      signed(db, 'paid', PENDING, 'paid_pending'),
      signed(db, 'paid', POSTED, 'paid_posted'),
      signed(db, 'allowance', PENDING, 'allowance_pending'),
    );
}

/** Per account and month, from the post entries: the account_months columns. */
export function recomputedAccountMonths(db: Conn) {
  return db('ledger_entries')
    .where({ type: 'post' })
    .groupBy('account_id', 'month')
    .select('account_id', 'month', db.raw('SUM(allowance) AS allowance_posted'), db.raw('SUM(paid) AS paid_posted'));
}

/** Per key, from the ledger entries: Gems held by its open reservations. */
export function recomputedKeys(db: Conn) {
  return db('ledger_entries')
    .whereNotNull('key_id')
    .whereNot({ type: 'credit' })
    .groupBy('key_id')
    .select('key_id', db.raw("SUM(CASE type WHEN 'hold' THEN allowance + paid ELSE -(allowance + paid) END) AS pending"));
}

/** Per key and month, from the post entries: Gems charged. */
export function recomputedKeyMonths(db: Conn) {
  return db('ledger_entries')
    .where({ type: 'post' })
    .whereNotNull('key_id')
    .groupBy('key_id', 'month')
    .select('key_id', 'month', db.raw('SUM(allowance + paid) AS posted'));
}

/** Per account, UTC day and kind, from the post entries and their reservations: Gems charged. */
export function recomputedAccountDays(db: Conn) {
  return db('ledger_entries as e')
    .join('reservations as r', 'r.id', 'e.reservation_id')
    .where('e.type', 'post')
    .groupBy('e.account_id', db.raw('SUBSTR(e.created_at, 1, 10)'), 'r.kind')
    .select('e.account_id', db.raw('SUBSTR(e.created_at, 1, 10) AS day'), 'r.kind', db.raw('SUM(e.allowance + e.paid) AS posted'));
}

const daysOfAccount = statement.rows<{ day: string; kind: string; posted: unknown }>('account-days', (c, account, from, to) =>
  c('account_days').where({ account_id: account }).where('day', '>=', from).where('day', '<=', to).select('day', 'kind', 'posted').orderBy('day'),
);

/** An account's stored charges per UTC day and kind, from day `from` to `to` (YYYY-MM-DD, both included). */
export async function accountDays(db: Conn, accountId: string, from: string, to: string): Promise<Array<{ day: string; kind: string; posted: number }>> {
  return (await query(db, daysOfAccount, [accountId, from, to])).map((r) => ({ day: r.day, kind: r.kind, posted: num(r.posted) }));
}

/** `INSERT INTO table (columns) <select>`: a builder as the rows of an insert. */
async function insertSelect(db: Conn, table: string, columns: string[], select: Knex.QueryBuilder): Promise<void> {
  const { sql, bindings } = select.toSQL();
  const into = db.raw(`INSERT INTO ?? (${columns.map(() => '??').join(', ')}) `, [table, ...columns]).toQuery();
  await query(
    db,
    statement.dynamic(`figures-fill:${table}`, (c) => c.raw(into + sql, bindings)),
  );
}

/**
 * Replaces every running figure with its recomputed value (the history seeder of
 * the benchmark; migration 006 keeps a frozen copy of its own). Every account and
 * key gets a balance row.
 */
export async function fillBalances(db: Conn): Promise<void> {
  for (const table of ['account_days', 'key_months', 'key_balances', 'account_months', 'account_balances'])
    await query(
      db,
      statement.write(`figures-clear:${table}`, (c) => c(table).delete()),
    );
  const acc = recomputedAccounts(db).as('f');
  await insertSelect(
    db,
    'account_balances',
    ['account_id', 'credited', 'paid_pending', 'paid_posted', 'allowance_pending'],
    db('accounts as a')
      .leftJoin(acc, 'f.account_id', 'a.id')
      .select('a.id', ...['credited', 'paid_pending', 'paid_posted', 'allowance_pending'].map((c) => db.raw('COALESCE(??, 0)', [`f.${c}`]))),
  );
  await insertSelect(db, 'account_months', ['account_id', 'month', 'allowance_posted', 'paid_posted'], recomputedAccountMonths(db));
  const keys = recomputedKeys(db).as('f');
  await insertSelect(
    db,
    'key_balances',
    ['key_id', 'pending'],
    db('api_keys as k')
      .leftJoin(keys, 'f.key_id', 'k.id')
      .select('k.id', db.raw('COALESCE(??, 0)', ['f.pending'])),
  );
  await insertSelect(db, 'key_months', ['key_id', 'month', 'posted'], recomputedKeyMonths(db));
  await insertSelect(db, 'account_days', ['account_id', 'day', 'kind', 'posted'], recomputedAccountDays(db));
}

/** One table of running figures: its stored rows beside the rows recomputed from the ledger. */
export interface FigureTable {
  table: string;
  /** Columns naming a row (account, key, month). */
  keys: string[];
  /** Columns holding figures. */
  figures: string[];
  stored: Array<Record<string, unknown>>;
  recomputed: Array<Record<string, unknown>>;
}

/** Every running figure, stored and recomputed, for `admin ledger verify`. */
export async function figureTables(db: Conn): Promise<FigureTable[]> {
  const specs: Array<[string, string[], string[], (c: Conn) => Knex.QueryBuilder]> = [
    ['account_balances', ['account_id'], ['credited', 'paid_pending', 'paid_posted', 'allowance_pending'], recomputedAccounts],
    ['account_months', ['account_id', 'month'], ['allowance_posted', 'paid_posted'], recomputedAccountMonths],
    ['key_balances', ['key_id'], ['pending'], recomputedKeys],
    ['key_months', ['key_id', 'month'], ['posted'], recomputedKeyMonths],
    ['account_days', ['account_id', 'day', 'kind'], ['posted'], recomputedAccountDays],
  ];
  // One after another: in a transaction they share one connection, which runs one query at a time anyway.
  const tables: FigureTable[] = [];
  for (const [table, keys, figures, recomputed] of specs) {
    const stored = await query(
      db,
      statement.rows(`figures-stored:${table}`, (c) => c(table).select('*')),
    );
    const fromLedger = await query(db, statement.rows(`figures-recomputed:${table}`, recomputed));
    tables.push({ table, keys, figures, stored, recomputed: fromLedger });
  }
  return tables;
}
