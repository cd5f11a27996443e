/**
 * The environment variables: src/env.ts is the one table, code reads variables only through it,
 * and the documents list exactly what it holds: README the users' variables, docs/testing.md the
 * tests' and docs/benchmarks.md the benchmarks'.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { environment, envValue } from "../../src/env.ts";

const root = resolve(import.meta.dir, "../..");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("environment variables", () => {
  const names = Object.keys(environment);

  test("src/ reads the environment only through src/env.ts", () => {
    const direct = files(join(root, "src"))
      .filter((f) => !f.endsWith("src/env.ts") && /process\.env\b/.test(readFileSync(f, "utf8")))
      .map((f) => relative(root, f));
    expect(direct).toEqual([]);
  });

  test("every variable src/, bench/ and test/ read is in the table", () => {
    const read = [...files(join(root, "src")), ...files(join(root, "bench")), ...files(join(root, "test"))]
      .flatMap((f) => [...readFileSync(f, "utf8").matchAll(/envValue\("([A-Z0-9_]+)"/g)].map((m) => m[1] as string));
    expect(read.length).toBeGreaterThan(0);
    for (const name of read) expect(names).toContain(name);
  });

  /** The upper-case names in backticks in a document's "## Environment variables" section. */
  function documented(file: string): string[] {
    const text = readFileSync(join(root, file), "utf8");
    const start = text.indexOf("\n## Environment variables\n");
    if (start < 0) throw new Error(`${file} has no "## Environment variables" section`);
    const end = text.indexOf("\n## ", start + 1);
    const section = text.slice(start, end < 0 ? undefined : end);
    return [...new Set([...section.matchAll(/`\$?([A-Z][A-Z0-9_]{2,})(?:=[^`]*)?`/g)].map((m) => m[1] as string))].sort();
  }
  const byAudience = (audience: string) =>
    Object.entries(environment).filter(([, v]) => v.audience === audience).map(([name]) => name).sort();

  for (const [file, audience] of [["README.md", "users"], ["docs/testing.md", "tests"], ["docs/benchmarks.md", "bench"]] as const) {
    test(`${file} names exactly the table's ${audience} variables`, () => {
      expect(byAudience(audience).length).toBeGreaterThan(0);
      expect(documented(file)).toEqual(byAudience(audience));
    });
  }

  test("every variable has one of the three audiences", () => {
    for (const entry of Object.values(environment)) expect(["users", "tests", "bench"]).toContain(entry.audience);
  });

  test("an unset or empty variable reads as undefined", () => {
    expect(envValue("K3_THREADS", {})).toBeUndefined();
    expect(envValue("K3_THREADS", { K3_THREADS: "" })).toBeUndefined();
    expect(envValue("K3_THREADS", { K3_THREADS: "3" })).toBe("3");
  });
});
