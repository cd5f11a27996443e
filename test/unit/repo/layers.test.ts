/**
 * The folders of src/ follow the path of one token, and imports only point the way the
 * import table allows (docs/architecture.md): this test reads that table and fails on any other
 * edge, so the document and the code cannot drift apart.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../../..");
const src = join(root, "src");

/** The ```layers block of docs/architecture.md: `from -> to to ...`, plus the leaves every folder may import. */
function allowedEdges(): { edges: Map<string, Set<string>>; leaves: Set<string>; outside: Map<string, Set<string>> } {
  const doc = readFileSync(join(root, "docs/architecture.md"), "utf8");
  const block = doc.match(/```layers\n([\s\S]*?)```/);
  if (!block?.[1]) throw new Error("docs/architecture.md has no ```layers block");
  const edges = new Map<string, Set<string>>();
  const outside = new Map<string, Set<string>>();
  let leaves = new Set<string>();
  for (const line of block[1].split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"))) {
    const [from, to = ""] = line.split("->").map((part) => part.trim());
    const targets = to.split(/\s+/).filter((t) => t && t !== "(nothing)");
    if (from === "leaves") leaves = new Set(targets);
    else if (from?.startsWith("outside ")) outside.set(from.slice("outside ".length), new Set(targets));
    else edges.set(from as string, new Set(targets));
  }
  return { edges, leaves, outside };
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** src/cli/run.ts -> "cli"; src/errors.ts -> "errors.ts". */
const unitOf = (path: string) => relative(src, path).split("/")[0] as string;

/** Relative import specifiers of a file: static, type-only, re-exports and dynamic. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)"(\.{1,2}\/[^"]+)"/g)].map((m) => m[1] as string);
  return found;
}

interface Edge {
  file: string;
  from: string;
  to: string;
}

function edgesOf(files: readonly string[]): Edge[] {
  return files.flatMap((file) =>
    importsOf(file).map((spec) => {
      const target = resolve(dirname(file), spec);
      const to = target.startsWith(`${src}/`) ? unitOf(target) : `outside ${relative(root, target).split("/")[0]}`;
      return { file: relative(root, file), from: unitOf(file), to };
    }),
  );
}

type Table = ReturnType<typeof allowedEdges>;

/** Import circles among files, each as "a -> b -> a" (paths relative to src/). */
function fileCycles(imports: ReadonlyMap<string, readonly string[]>): string[] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const found: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    stack.push(file);
    for (const next of imports.get(file) ?? []) {
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next].map((f) => relative(src, f)).join(" -> "));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of imports.keys()) if (!state.has(file)) visit(file);
  return found;
}

/** The imports the table does not allow, as "file: from -> to". */
function violations(all: readonly Edge[], { edges, leaves, outside }: Table): string[] {
  return all
    .filter(({ from, to }) => {
      if (from === to) return false;
      if (to.startsWith("outside ")) return !outside.get(to.slice("outside ".length))?.has(from);
      if (leaves.has(to)) return false;
      if (leaves.has(from)) return true; // leaves import only leaves
      return !edges.get(from)?.has(to);
    })
    .map((e) => `${e.file}: ${e.from} -> ${e.to}`);
}

describe("import layering (docs/architecture.md's import table)", () => {
  const table = allowedEdges();
  const { edges, leaves } = table;
  const files = sourceFiles(src);
  const all = edgesOf(files);

  test("every folder and root file of src/ is in the table", () => {
    const units = new Set(files.map(unitOf));
    for (const unit of units) expect(`${unit}: ${edges.has(unit) || leaves.has(unit)}`).toBe(`${unit}: true`);
  });

  test("no import runs against the table", () => {
    expect(violations(all, table)).toEqual([]);
  });

  test("every edge of the table is used by an import, so the table says what the code does", () => {
    const used = new Set(all.map(({ from, to }) => `${from} -> ${to}`));
    const listed = [
      ...[...edges].flatMap(([from, targets]) => [...targets].map((to) => `${from} -> ${to}`)),
      ...[...table.outside].flatMap(([dir, users]) => [...users].map((from) => `${from} -> outside ${dir}`)),
    ];
    expect(listed.filter((edge) => !used.has(edge))).toEqual([]);
  });

  test("the table is acyclic, so the layers have an order", () => {
    const visiting = new Set<string>();
    const done = new Set<string>();
    const visit = (unit: string, path: string[]): void => {
      if (done.has(unit)) return;
      if (visiting.has(unit)) throw new Error(`cycle: ${[...path, unit].join(" -> ")}`);
      visiting.add(unit);
      for (const next of edges.get(unit) ?? []) visit(next, [...path, unit]);
      visiting.delete(unit);
      done.add(unit);
    };
    for (const unit of edges.keys()) visit(unit, []);
  });

  test("the check can fail: the edges k3 used to have are caught", () => {
    const old: Edge[] = [
      { file: "src/weights/streamed-trunk.ts", from: "weights", to: "plan" },
      { file: "src/model/forward.ts", from: "model", to: "decode" },
      { file: "src/plan/memory-plan.ts", from: "plan", to: "report" },
      { file: "src/weights/expert-trace.ts", from: "weights", to: "report" },
      { file: "src/native/kernels.ts", from: "native", to: "weights" },
      { file: "src/fs.ts", from: "fs.ts", to: "report" },
      { file: "src/cli/demo-assets.ts", from: "cli", to: "outside test" },
    ];
    expect(violations(old, table)).toHaveLength(old.length);
    // And the parser sees static, type-only and dynamic imports.
    expect(importsOf(join(src, "cli/main.ts"))).toContain("./run.ts");
  });

  test("no two files of src/ import each other, even through others (types included)", () => {
    const byFile = new Map(files.map((f) => [f, importsOf(f).map((spec) => resolve(dirname(f), spec)).filter((t) => t.endsWith(".ts"))]));
    expect(fileCycles(byFile)).toEqual([]);
    // the check can fail: the circle native/isa.ts and native/library.ts once made
    const isa = join(src, "native/isa.ts");
    const library = join(src, "native/library.ts");
    expect(fileCycles(new Map([[isa, [library]], [library, [isa]]]))).toHaveLength(1);
  });

  test("bun:ffi is used only inside src/native", () => {
    const users = files.filter((f) => /from\s+"bun:ffi"/.test(readFileSync(f, "utf8"))).map((f) => relative(root, f));
    expect(users.filter((f) => !f.startsWith("src/native/"))).toEqual([]);
  });
});
