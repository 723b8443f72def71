/**
 * A second process that changes an account or key the moment it is told to:
 * `node --import tsx account-change-child.ts <revoke KEY_ID | block ACCOUNT_ID>`
 * (DATA_DIR / DATABASE_URL from the environment). It opens the database, prints
 * `ready`, waits for one line on stdin, makes the change through the same
 * domain code the admin CLI uses, prints `done` and exits.
 */
import readline from 'node:readline';
import { openDb } from '../../server/storage/db.ts';
import * as accounts from '../../server/domain/accounts.ts';
import { systemClock } from '../../server/domain/clock.ts';

const [action, id] = process.argv.slice(2);
const db = await openDb({ dataDir: process.env.DATA_DIR!, databaseUrl: process.env.DATABASE_URL || undefined });
const lines = readline.createInterface({ input: process.stdin });
console.log('ready');
await new Promise((resolve) => lines.once('line', resolve));
if (action === 'revoke') await accounts.revokeKey(db, systemClock, id);
else if (action === 'block') await accounts.updateAccount(db, systemClock, id, { state: 'blocked' });
else throw new Error(`unknown action ${action}`);
console.log('done');
lines.close();
await db.destroy();
