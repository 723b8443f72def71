/**
 * No import circle among server/ files, type-only imports included: a circle
 * makes the floors meaningless (each file in it depends on every other), and a
 * run-time one makes a module's values undefined while the circle loads. Read
 * off the sources, so a new circle fails here naming it file by file.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { importsOf, sources } from '../helpers/imports.ts';

type Graph = Map<string, string[]>;

/** server/'s files and the files of server/ each imports (packages and generated/ left out). */
function serverGraph(): Graph {
  const files = sources('');
  const known = new Set(files);
  return new Map(
    files.map((f) => [
      f,
      [
        ...new Set(
          importsOf(f)
            .map((i) => i.target)
            .filter((t) => known.has(t)),
        ),
      ],
    ]),
  );
}

/** The strongly connected parts of more than one file (or a file importing itself) (Tarjan). */
function tangles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const part: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      part.push(w);
    } while (w !== v);
    if (part.length > 1 || graph.get(v)!.includes(v)) found.push(part.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** One circle through a tangle's first file, as "a → b → … → a" (breadth first, so the shortest). */
function circleOf(graph: Graph, part: string[]): string {
  const inside = new Set(part);
  const start = part[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start].join(' → ');
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return part.join(', ');
}

/** Each circle, named, with how many files its tangle holds. */
function circles(graph: Graph): string[] {
  return tangles(graph).map((part) => `${circleOf(graph, part)}${part.length > 2 ? ` (a tangle of ${part.length} files: ${part.join(', ')})` : ''}`);
}

describe('import cycles', () => {
  it('when every server/ file is read, type-only imports included, then no import circle is found', () => {
    const graph = serverGraph();
    assert.ok(graph.size > 150 && graph.get('app.ts')!.includes('routes/media.ts'), 'the scan reads the server');
    assert.deepEqual(circles(graph), [], 'break the circle: move what both sides need into a module of its own, below both');
  });

  it('when the graph has a circle, then it is found and named file by file (the tripwire itself works)', () => {
    const graph: Graph = new Map([
      ['app.ts', ['routes/a.ts', 'deps.ts']],
      ['routes/a.ts', ['app.ts']],
      ['deps.ts', []],
      ['x.ts', ['y.ts']],
      ['y.ts', ['z.ts']],
      ['z.ts', ['x.ts']],
      ['self.ts', ['self.ts']],
    ]);
    assert.deepEqual(circles(graph), [
      'app.ts → routes/a.ts → app.ts',
      'self.ts → self.ts',
      'x.ts → y.ts → z.ts → x.ts (a tangle of 3 files: x.ts, y.ts, z.ts)',
    ]);
  });
});
