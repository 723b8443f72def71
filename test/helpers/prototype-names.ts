/** Names every plain object inherits: user text that must never find them in a table. */
export const PROTOTYPE_NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', 'toLocaleString', '__defineGetter__'];
