/**
 * The native boundary. The kernels are declared once (zig/kernels/table.zig `entries`) and
 * their exports and bun:ffi declarations (zig-out/abi/kernels.ts) are derived by the build, so
 * this test checks the derivation's result names the same kernels in the same order. The rest
 * is written on two sides, zig/abi.zig and src/native/abi.ts; this test is what makes them one
 * declaration. It reads the Zig side as text: the `export fn` signatures (over one line or
 * several) and the constants that abi.ts names in its "Mirrors zig/… `name`" comments. Any
 * difference in names, order, arity, FFI types or values fails it, so a change made on one
 * side only cannot pass.
 */
import { describe, expect, test } from "bun:test";
import { FFIType } from "bun:ffi";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import * as abi from "../../../src/native/abi.ts";
import * as generated from "../../../zig-out/abi/kernels.ts";

const root = resolve(import.meta.dir, "../../..");
const abiZig = "zig/abi.zig";
const abiTs = "src/native/abi.ts";

/** Zig source without comments (the files parsed here have no `//` inside string literals). */
function zigSource(path: string): string {
  return readFileSync(join(root, path), "utf8").replace(/\/\/.*$/gm, "");
}

/** Splits at commas that are not inside (), [] or {}. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "(" || ch === "[" || ch === "{") depth++;
    else if (ch === ")" || ch === "]" || ch === "}") depth--;
    else if (ch === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

/** The bun:ffi type a Zig parameter or return type crosses the boundary as. */
function ffiTypeOf(zigType: string): string {
  const t = zigType.replace(/\s+/g, " ").trim();
  if (/^\??\[\*:0\] ?const u8$/.test(t)) return "cstring";
  if (/^\??(\*|\[\*\])/.test(t)) return "ptr";
  if (["u32", "u64", "i32", "f32", "void"].includes(t)) return t;
  throw new Error(`no FFI mapping for the Zig type '${zigType}'`);
}

interface Signature {
  name: string;
  args: string[];
  returns: string;
}

/** The parameters and return type of `pub fn name(...)` in a Zig source. */
function exportedLike(source: string, name: string): { params: string[]; returns: string } {
  const match = source.match(new RegExp(`\\bpub fn ${name}\\s*\\(`));
  if (!match) throw new Error(`no 'pub fn ${name}'`);
  const open = (match.index ?? 0) + match[0].length;
  let depth = 1;
  let at = open;
  while (depth > 0) {
    if (at >= source.length) throw new Error(`unbalanced parameter list of ${name}`);
    const ch = source[at++];
    if (ch === "(") depth++;
    else if (ch === ")") depth--;
  }
  return { params: splitTopLevel(source.slice(open, at - 1)), returns: source.slice(at, source.indexOf("{", at)) };
}

/** Every `export fn name(params) ret {` of a Zig source, in file order. */
function exportedFunctions(source: string): Signature[] {
  const found: Signature[] = [];
  for (const match of source.matchAll(/\bexport\s+fn\s+(\w+)\s*\(/g)) {
    const open = (match.index ?? 0) + match[0].length;
    let depth = 1;
    let at = open;
    while (depth > 0) {
      if (at >= source.length) throw new Error(`unbalanced parameter list of ${match[1]}`);
      const ch = source[at++];
      if (ch === "(") depth++;
      else if (ch === ")") depth--;
    }
    const params = splitTopLevel(source.slice(open, at - 1));
    const returns = source.slice(at, source.indexOf("{", at));
    found.push({
      name: match[1] as string,
      args: params.map((p) => {
        const colon = p.indexOf(":");
        if (colon < 0) throw new Error(`${match[1]}: parameter '${p}' has no type`);
        return ffiTypeOf(p.slice(colon + 1));
      }),
      returns: ffiTypeOf(returns),
    });
  }
  return found;
}

const ffiNames = new Map<number, string>([
  [FFIType.u32, "u32"], [FFIType.u64, "u64"], [FFIType.i32, "i32"], [FFIType.f32, "f32"],
  [FFIType.ptr, "ptr"], [FFIType.cstring, "cstring"], [FFIType.void, "void"],
]);

function ffiName(type: number): string {
  const name = ffiNames.get(type);
  if (!name) throw new Error(`abi.ts uses FFIType ${type}, which this test does not map`);
  return name;
}

const kernelNames = new Set(Object.keys(generated.kernelSymbols));

/** The functions abi.ts declares by hand: every symbol but the generated kernels'. */
const tsSignatures: Signature[] = Object.entries(abi.symbols).filter(([name]) => !kernelNames.has(name)).map(([name, s]) => ({
  name,
  args: (s.args as readonly number[]).map(ffiName),
  returns: ffiName(s.returns),
}));

const camel = (snake: string) => snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

type ZigConstant =
  | { kind: "integer"; value: number }
  | { kind: "enum"; members: Record<string, number> }
  | { kind: "struct"; fields: string[] };

const escape = (name: string) => name.replace(/[^\w]/g, "");

/** A `pub const` of a Zig file: an integer, an enum with explicit values, or an extern struct. */
function zigConstant(path: string, name: string): ZigConstant {
  const source = zigSource(path);
  const n = escape(name);
  const integer = source.match(new RegExp(`\\bpub const ${n}(?:\\s*:\\s*\\w+)?\\s*=\\s*(-?(?:0x[0-9a-fA-F_]+|[0-9_]+))\\s*;`));
  if (integer) return { kind: "integer", value: Number((integer[1] as string).replace(/_/g, "")) };
  const enumMatch = source.match(new RegExp(`\\bpub const ${n}\\s*=\\s*enum\\s*\\(\\s*\\w+\\s*\\)\\s*\\{([^}]*)\\}`));
  if (enumMatch) {
    const members: Record<string, number> = {};
    for (const member of splitTopLevel(enumMatch[1] as string)) {
      const m = member.match(/^(\w+)\s*=\s*(-?\d+)$/);
      if (!m) throw new Error(`${path} ${name}: member '${member}' has no explicit value`);
      members[camel(m[1] as string)] = Number(m[2]);
    }
    return { kind: "enum", members };
  }
  const struct = source.match(new RegExp(`\\bpub const ${n}\\s*=\\s*extern struct\\s*\\{([^}]*)\\}`));
  if (struct) return { kind: "struct", fields: splitTopLevel(struct[1] as string).map((f) => camel(f.split(":")[0]!.trim())) };
  throw new Error(`${path} has no integer, enum or extern struct 'pub const ${name}'`);
}

interface Mirror {
  ts: string;
  file: string;
  zig: string;
}

/** Each `export const` of abi.ts with the Zig declaration its doc comment names. */
function declaredMirrors(): Mirror[] {
  const text = readFileSync(join(root, abiTs), "utf8");
  const mirrors: Mirror[] = [];
  for (const m of text.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*export const (\w+)/g)) {
    const named = (m[1] as string).match(/Mirrors (zig\/[\w/]+\.zig) `(\w+)`/);
    if (named) mirrors.push({ ts: m[2] as string, file: named[1] as string, zig: named[2] as string });
  }
  return mirrors;
}

function zigFiles(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(join(root, path)).isDirectory()) return zigFiles(path);
    return path.endsWith(".zig") ? [path] : [];
  });
}

/** The declaration names of zig/kernels/table.zig `entries`, in order. */
function kernelEntries(): string[] {
  const source = zigSource("zig/kernels/table.zig");
  const open = source.indexOf("pub const entries = struct {");
  if (open < 0) throw new Error("zig/kernels/table.zig has no `pub const entries = struct {`");
  let depth = 0;
  let at = source.indexOf("{", open);
  const start = at;
  do {
    const ch = source[at++];
    if (ch === "{") depth++;
    else if (ch === "}") depth--;
  } while (depth > 0 && at < source.length);
  return [...source.slice(start, at).matchAll(/\bpub const (\w+)\s*=/g)].map((m) => m[1] as string);
}

describe("the kernels: zig/kernels/table.zig `entries` and the generated declarations", () => {
  test("one bun:ffi declaration per entry, k3_<name>, in the table's order", () => {
    const entries = kernelEntries();
    expect(entries.length).toBeGreaterThan(15);
    expect(Object.keys(generated.kernelSymbols)).toEqual(entries.map((name) => `k3_${name}`));
  });

  test("abi.ts loads every generated kernel and declares none by hand", () => {
    for (const name of kernelNames) expect(abi.symbols[name as keyof typeof abi.symbols]).toBe(generated.kernelSymbols[name as keyof typeof generated.kernelSymbols]);
    expect(exportedFunctions(zigSource(abiZig)).filter((f) => kernelNames.has(f.name))).toEqual([]);
  });

  // The rules of zig/kernels/entry.zig, read here a second time from the kernels' source: a
  // pointer (nullable or not) crosses as ptr, usize as u32, an enum(u32) as u32, the scalars as
  // themselves, and an Error!u64 result as one more ptr (the count).
  const modules = new Map<string, string>();
  const table = zigSource("zig/kernels/table.zig");
  for (const m of table.matchAll(/\bpub const (\w+) = @import\("(\w+\.zig)"\);/g)) modules.set(m[1] as string, `zig/kernels/${m[2]}`);
  for (const m of table.matchAll(/\bconst (\w+) = (\w+);/g)) if (modules.has(m[2] as string)) modules.set(m[1] as string, modules.get(m[2] as string) as string);
  const targets = new Map([...table.matchAll(/\bpub const (\w+) = (\w+)\.(\w+);/g)].map((m) => [m[1] as string, { file: modules.get(m[2] as string), fn: m[3] as string }]));

  function abiArgs(file: string, fn: string): string[] {
    const source = zigSource(file);
    const found = exportedLike(source, fn);
    const args = found.params.map((p) => {
      const type = p.slice(p.indexOf(":") + 1).trim();
      if (/^\??(\*|\[\*\])/.test(type)) return "ptr";
      if (type === "usize") return "u32";
      if (["u32", "u64", "f32"].includes(type)) return type;
      if (new RegExp(`\\bpub const ${type}\\s*=\\s*enum\\s*\\(u32\\)`).test(source)) return "u32";
      throw new Error(`${file} ${fn}: no ABI rule for the parameter type '${type}'`);
    });
    if (/!\s*u64\s*$/.test(found.returns.trim())) args.push("ptr");
    else if (!/!\s*void\s*$/.test(found.returns.trim())) throw new Error(`${file} ${fn}: returns '${found.returns.trim()}', not Error!void or Error!u64`);
    return args;
  }

  for (const name of kernelEntries()) {
    const target = targets.get(name) ?? { file: undefined, fn: name };
    test(`k3_${name}'s declaration follows ${target.file} \`${target.fn}\``, () => {
      if (!target.file) throw new Error(`entries.${name} is not 'module.function' of a file table.zig imports`);
      const symbol = generated.kernelSymbols[`k3_${name}` as keyof typeof generated.kernelSymbols];
      expect((symbol.args as readonly number[]).map(ffiName)).toEqual(abiArgs(target.file as string, target.fn));
      expect(ffiName(symbol.returns)).toBe("i32");
    });
  }

  test("the elementwise codes are zig/kernels/elementwise.zig `Op`", () => {
    const zig = zigConstant("zig/kernels/elementwise.zig", "Op");
    expect(zig.kind === "enum" && zig.members).toEqual(abi.ElementwiseOp);
  });
});

describe("the ABI: zig/abi.zig and src/native/abi.ts", () => {
  const zigSignatures = exportedFunctions(zigSource(abiZig));

  test("zig/abi.zig is the only Zig file with `export fn`", () => {
    const exporting = zigFiles("zig").filter((path) => exportedFunctions(zigSource(path)).length > 0);
    expect(exporting).toEqual([abiZig]);
  });

  test("the same functions, in the same order", () => {
    expect(zigSignatures.length).toBeGreaterThan(20);
    expect(tsSignatures.map((s) => s.name)).toEqual(zigSignatures.map((s) => s.name));
  });

  test("every function has the same arity, argument types in order, and return type", () => {
    for (const zig of zigSignatures) {
      const ts = tsSignatures.find((s) => s.name === zig.name);
      expect(ts).toEqual(zig);
    }
  });

  const mirrors = declaredMirrors();

  test("every constant of abi.ts names the Zig declaration it mirrors", () => {
    const exported = Object.keys(abi).filter((name) => name !== "symbols" && !(name in generated)).sort();
    expect(mirrors.map((m) => m.ts).sort()).toEqual(exported);
  });

  test("every integer and alias constant of zig/abi.zig is mirrored", () => {
    const source = zigSource(abiZig);
    const imports = new Map([...source.matchAll(/\bconst (\w+) = @import\("([\w/.]+\.zig)"\);/g)].map((m) => [m[1] as string, `zig/${m[2]}`]));
    for (const m of source.matchAll(/\bpub const (\w+)(?:\s*:\s*\w+)?\s*=\s*([^;]+);/g)) {
      const value = (m[2] as string).trim();
      if (value.startsWith("@import(")) continue;
      const alias = value.match(/^(\w+)\.(\w+)$/);
      const want = alias ? { file: imports.get(alias[1] as string), zig: alias[2] } : { file: abiZig, zig: m[1] };
      expect(mirrors.some((x) => x.file === want.file && x.zig === want.zig), `${m[1]} = ${value}`).toBe(true);
    }
  });

  for (const mirror of mirrors) {
    test(`${mirror.ts} equals ${mirror.file} \`${mirror.zig}\``, () => {
      const zig = zigConstant(mirror.file, mirror.zig);
      const ts: unknown = abi[mirror.ts as keyof typeof abi];
      if (zig.kind === "integer") expect(ts).toBe(zig.value);
      else if (zig.kind === "enum") expect(ts).toEqual(zig.members);
      else expect(ts).toEqual(zig.fields);
    });
  }
});
