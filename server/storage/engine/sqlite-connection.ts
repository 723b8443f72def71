/** Opening and closing a bare node-sqlite3 connection as promises (the read connections, the checkpoint connection). */
import sqlite3 from 'sqlite3';

/** Opens `file` with `mode` (sqlite3.OPEN_READONLY, OPEN_READWRITE, …). */
export function openConnection(file: string, mode: number): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const conn = new sqlite3.Database(file, mode, (error) => (error ? reject(error) : resolve(conn)));
  });
}

export function closeConnection(conn: sqlite3.Database): Promise<void> {
  return new Promise((resolve, reject) => conn.close((error) => (error ? reject(error) : resolve())));
}
