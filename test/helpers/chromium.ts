/**
 * Debian's Chromium for browser tests, driven by playwright-core (no browser
 * downloads here). `missing` is the reason to skip when it is not installed
 * (`.ci/run` installs it).
 */
import fs from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const missing = fs.existsSync(CHROMIUM) ? false : `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`;
export const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
