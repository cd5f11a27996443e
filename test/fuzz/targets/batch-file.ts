/** `--batch FILE` (src/cli/batch-file.ts): one prompt per line, ids as --ids takes them or text as a JSON string. */
import { parseBatchLines } from "../../../src/cli/batch-file.ts";
import { byteTokenizer, promptIds, text, tinyModel, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateText } from "../mutate.ts";

const seeds = [
  `${promptIds}\n${promptIds.replaceAll(",", " ")}\n`,
  `{"ids": [${promptIds}]}\n"Once upon a time"\n"two\\nlines \\u00e9"\n`,
  `"a"\r\n${promptIds}`,
];

export const batchFileTarget: FuzzTarget = {
  name: "batch-file",
  about: "--batch FILE: parseBatchLines (ids lines, JSON-string text lines, CRLF, blank lines)",
  seeds: () => seeds.map((t, i): Seed => ({ label: `batch ${i}`, bytes: utf8(t) })),
  mutate: (input, rng, all) => mutateText(input, rng, all.map((s) => s.bytes)),
  parse: (input) => JSON.stringify(parseBatchLines(text(input), "FILE")),
  command: (input) => ({
    args: [tinyModel, "--batch", "/dev/stdin", "--tok", byteTokenizer, "--parallel", "2", "--gen", "2"], stdin: input, names: ["--batch", "--gen", "prompt"],
  }),
  // Each prompt's ids in order, whatever the batch did.
  output: (stdout) => stdout.split("\n").filter(Boolean).map((line) => {
    try {
      return JSON.stringify((JSON.parse(line) as { generated_ids?: unknown }).generated_ids);
    } catch {
      return line;
    }
  }).join("\n"),
};
