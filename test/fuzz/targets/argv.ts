/**
 * The command line of `k3 <model_dir>` (src/cli/args.ts, run-options.ts): flags from the option
 * table itself, so an option added later is fuzzed too, and values at their edges. Paths are
 * placeholders: {dir} (the input's own directory), {pack} (tiny13's packed trunk), {tok} (the
 * byte-level tokenizer); the last two are links made in the input's directory, so that a flag that
 * writes (`--dump-cache-trace {tok}`) writes only there.
 */
import { join } from "node:path";
import { findInfoFlag } from "../../../src/cli/args.ts";
import { parseRunArgs } from "../../../src/cli/run.ts";
import { runCommand, runOptionTable } from "../../../src/cli/run-options.ts";
import { byteTokenizer, linkDir, promptIds, runIds, text, tinyModel, tinyPack, utf8 } from "../fixtures.ts";
import type { FuzzContext, FuzzTarget, Seed } from "../harness.ts";
import { mutateArgv } from "../mutate.ts";

const flags = [
  ...runOptionTable.map((o) => `--${o.name}`), ...runOptionTable.flatMap((o) => (o.alias ? [`-${o.alias}`] : [])), "--help", "-h", "--nope",
];
const values = [
  "0", "1", "2", "3", "7", "-1", "64", "4097", "99999999999999999999", "1e3", "0x10", "1.5", "-0.5", "NaN", "Infinity", "", " ", "abc",
  "1,2,3", promptIds, "1,,2", "1 2", "-", "laptop", "ultra", "auto", "nope", "0.000001", "{dir}/out.json", "{dir}", "{dir}/missing/x.json",
  "{pack}", "{tok}", "é", "--", "1\n2", "'", "x".repeat(3000), "9".repeat(3000),
];

let pack: string | undefined;

/** The placeholders made paths for a binary run, under `dir`. */
function resolved(args: readonly string[], dir: string): string[] {
  const links = { pack: join(dir, "pack"), tok: join(dir, "tok") };
  linkDir(links.pack, pack as string);
  linkDir(links.tok, byteTokenizer);
  return args.map((a) => a.replaceAll("{dir}", dir).replaceAll("{pack}", links.pack).replaceAll("{tok}", links.tok));
}

const decode = (input: Uint8Array): string[] => {
  const parsed = JSON.parse(text(input)) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === "string")) throw new Error("argv input is not an array of strings");
  return parsed as string[];
};

export const argvTarget: FuzzTarget = {
  name: "argv",
  about: "the command line of k3 <model_dir>: parseRunArgs (order, values, mutual exclusions, limits)",
  seeds: (ctx: FuzzContext) => {
    pack = tinyPack(ctx);
    return [
      ["--ids", promptIds, "--gen", "2", "--out", "-"],
      ["--ids", promptIds, "--gen", "3", "--recompute", "--prefill-chunk", "2", "--temperature", "0.7", "--seed", "3", "--out", "-"],
      ["--prompt", "Hi there", "--tok", "{tok}", "--gen", "2", "--trunk", "{pack}", "--trunk-gb", "0", "--out", "-"],
    ].map((args) => ({ label: args.join(" "), bytes: utf8(JSON.stringify(args)) }));
  },
  mutate: (input, rng) => utf8(JSON.stringify(mutateArgv(decode(input), rng, flags, values))),
  parse(input: Uint8Array, _seed: Seed) {
    const args = decode(input);
    const info = findInfoFlag(args, runCommand.options, ["help", "version", "list-presets"]);
    return info ? `info ${info}` : JSON.stringify(parseRunArgs(["MODEL", ...args]));
  },
  command: (input, _seed, dir) => ({ args: [tinyModel, ...resolved(decode(input), dir)], names: [] }),
  output: runIds,
};
