/**
 * Column values as the row types say them, whichever driver read them: SQLite
 * and Postgres hand back numbers, strings (Postgres bigint, numeric) or null
 * for the same column, so a row mapper normalises each through these.
 */

/** A nullable numeric column: null stays null (never 0), anything else is a number. */
export function nullableNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}
