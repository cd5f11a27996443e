/**
 * The environment variables: src/env.ts is the one table, code reads variables only through it,
 * and README's list says exactly what the table holds.
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

  test("README's environment paragraph names exactly the table's variables", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("Environment ("), readme.indexOf("## Memory is a dial"));
    expect(section.length).toBeGreaterThan(0);
    const mentioned = new Set([...section.matchAll(/`\$?([A-Z][A-Z0-9_]{2,})(?:=[^`]*)?`/g)].map((m) => m[1] as string));
    expect([...mentioned].sort()).toEqual([...names].sort());
  });

  test("an unset or empty variable reads as undefined", () => {
    expect(envValue("K3_THREADS", {})).toBeUndefined();
    expect(envValue("K3_THREADS", { K3_THREADS: "" })).toBeUndefined();
    expect(envValue("K3_THREADS", { K3_THREADS: "3" })).toBe("3");
  });
});
