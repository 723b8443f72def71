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
 * 16 MiB semi-spaces (a 32 MiB young generation at most; what Node up to 20
 * used on 64-bit machines): 32 MiB ones held 64 MiB resident through any burst
 * of requests, and a completion's young objects die within a few requests, far
 * inside 16 MiB. `--heap-growing-percent=50` lets the old generation grow to
 * 1.5× what the last full collection kept, where V8 otherwise picks up to 4×
 * for a heap it collects fast: the garbage each completion promotes is then
 * collected every few thousand requests instead of piling up (a full collection
 * of the ~40 MB live heap, mostly concurrent, per ~20 MB promoted). Measured
 * on 10,000 chat completions (docs/performance.md, Start-up and memory): RSS
 * right after 210–246 MB with 32 MiB, 162–207 with 16, 165–169 with both.
 *
 * `--expose-gc` lets server/memory.ts hand that young generation and start-up's
 * garbage back once requests pause (~220 MB resident after start became ~110).
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16', '--heap-growing-percent=50', '--expose-gc'];

/** The arguments after the Node binary that start the server from the repository root. */
export const SERVER_ARGS: readonly string[] = [...SERVER_NODE_FLAGS, '--import', 'tsx', 'server/main.ts'];

/** The same for the compiled server (scripts/build.mjs writes dist/): what `npm start` runs after its build check. */
export const COMPILED_SERVER_ARGS: readonly string[] = [...SERVER_NODE_FLAGS, 'dist/server.mjs'];
