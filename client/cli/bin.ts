#!/usr/bin/env node
/** The `gemforge` command of the @gemforge/client package (the API client CLI; the admin commands stay with the server). */
import { runCli } from './main.ts';

process.exitCode = await runCli(process.argv.slice(2));
