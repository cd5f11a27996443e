/**
 * A unit test is found from its module: test/unit/<folder>/<module>[-aspect].test.ts tests
 * src/<folder>/<module>.ts, test/unit/<module>[-aspect].test.ts a root file src/<module>.ts, and
 * test/unit/repo/ holds the tests of the repository as a whole (docs/architecture.md's import
 * table, the one loop, the suite's temporaries, a fixture against its generator). This test fails on a file
 * placed otherwise, so the tree of tests cannot drift from the tree of src/.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../../..");
const src = join(root, "src");
const unitDir = join(root, "test/unit");
/** The one folder of test/unit that mirrors no folder of src/. */
const repoWide = "repo";

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** Why a file of test/unit (given relative to it) breaks the rule; undefined where it belongs. */
function misplacement(path: string, srcModules: ReadonlySet<string>): string | undefined {
  if (!path.endsWith(".test.ts")) return `${path}: only tests live in test/unit (helpers go in test/support)`;
  const parts = path.split("/");
  if (parts.length > 2) return `${path}: one folder deep at most, as src/ is`;
  const [folder, file] = parts.length === 2 ? [`${parts[0]}/`, parts[1] as string] : ["", parts[0] as string];
  if (folder === `${repoWide}/`) return undefined;
  if (folder && ![...srcModules].some((m) => m.startsWith(folder))) return `${path}: src/${folder} is not a folder of src/`;
  // Module names have hyphens too, so any leading run of the name's words may be the module.
  const words = file.slice(0, -".test.ts".length).split("-");
  const named = words.some((_, i) => srcModules.has(`${folder}${words.slice(0, i + 1).join("-")}.ts`));
  return named ? undefined : `${path}: no src/${folder}<name>.ts is named by the start of ${file}`;
}

describe("test/unit mirrors src/", () => {
  const srcModules = new Set(filesUnder(src).filter((f) => f.endsWith(".ts")).map((f) => relative(src, f)));
  const tests = filesUnder(unitDir).map((f) => relative(unitDir, f));

  test("every unit test sits where the module it tests is", () => {
    expect(tests.length).toBeGreaterThan(0);
    expect(tests.map((t) => misplacement(t, srcModules)).filter((why) => why !== undefined)).toEqual([]);
  });

  test(`src/ has no folder named ${repoWide}, so that name stays the repository's`, () => {
    expect([...srcModules].filter((m) => m.startsWith(`${repoWide}/`))).toEqual([]);
  });

  test("the rule can fail: misplaced tests are caught, well-placed ones pass", () => {
    const misplaced = [
      "chat-json.test.ts", // flat, as test/unit used to be
      "chat/json.test.ts", // no src/chat/json.ts
      "weights/cache-sim.test.ts", // its module moved to src/offline
      "ops/doctor.test.ts", // no src/ops
      "native/deep/kernels.test.ts",
      "kernels.ts",
    ];
    expect(misplaced.filter((t) => misplacement(t, srcModules) === undefined)).toEqual([]);
    const placed = [
      "native/kernels-op-fixtures.test.ts",
      "weights/streamed-trunk.test.ts",
      "report/run-report.test.ts",
      "json.test.ts",
      `${repoWide}/layers.test.ts`,
    ];
    expect(placed.map((t) => misplacement(t, srcModules)).filter((why) => why !== undefined)).toEqual([]);
  });
});
