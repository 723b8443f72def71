/**
 * The Node command line the server runs under, written once for every
 * launcher in TypeScript (benchmarks, tests' server children, `npm run dev`);
 * `npm start` and scripts/demo-multi.sh spell it in their own languages and
 * test/runtime.test.ts holds them equal to this.
 *
 * Why a V8 flag at all: Node 24's V8 sizes the young generation from the heap
 * limit, and on a machine with 16 GB or more (a 4 GB limit) each of its two
 * semi-spaces may grow to 64 MiB. Start-up (tsx compiling the sources, the
 * contracts parsed and their validators compiled) grows them to that size
 * within a second, and they stay until V8 finds the process idle for minutes.
 * Resident memory counts the pages written, so a server just started showed
 * 242 or 300 MiB depending only on whether allocation had yet run through the
 * second semi-space: a little more start-up work (cb3718c against 2528a5e)
 * moved it from one figure to the other, and any request that allocates moves
 * it too (bench:uploads' 300 MiB bomb row failed at either commit). With
 * 16 MiB semi-spaces the two commits' servers were within 2 MiB.
 *
 * 32 MiB semi-spaces (a 64 MiB young generation at most) keep a server near
 * 245 MiB after start whatever it has run, and still give young objects 32 MiB
 * to die in: Node up to 20 used 16 MiB on 64-bit machines.
 *
 * `--expose-gc` lets server/memory.ts hand that young generation and start-up's
 * garbage back once requests pause (~220 MB resident after start became ~110).
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32', '--expose-gc'];

/** The arguments after the Node binary that start the server from the repository root. */
export const SERVER_ARGS: readonly string[] = [...SERVER_NODE_FLAGS, '--import', 'tsx', 'server/main.ts'];

/** The same for the compiled server (scripts/build.mjs writes dist/): what `npm start` runs after its build check. */
export const COMPILED_SERVER_ARGS: readonly string[] = [...SERVER_NODE_FLAGS, 'dist/server.mjs'];
