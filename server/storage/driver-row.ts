/**
 * A row as the database drivers give it, before its mapper: the columns the
 * two drivers give differently (SQLite's booleans as 0/1, Postgres's bigints
 * and numerics as strings) are `unknown` until the mapper normalises them; the
 * others are as the row type declares. A mapper spreading it and setting those
 * columns then yields the row type without a cast.
 */
export type DriverRow<T, Loose extends keyof T> = Omit<T, Loose> & { [K in Loose]: unknown };
