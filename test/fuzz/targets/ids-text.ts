/** Prompt ids as text (src/cli/prompt.ts): `--ids -` on stdin, comma/space separated or {"ids":[...]}. */
import { parseIdsText } from "../../../src/cli/prompt.ts";
import { promptIds, runIds, text, tinyModel, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

export const idsTextTarget: FuzzTarget = {
  name: "ids-text",
  about: "--ids - text: parseIdsText (separators, JSON form, huge and negative ids)",
  seeds: () => [promptIds, `{"ids": [${promptIds}]}`, `${promptIds.replaceAll(",", " ")}\n`].map((t, i): Seed => ({ label: `ids ${i}`, bytes: utf8(t) })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input) => JSON.stringify(parseIdsText(text(input), "--ids - (stdin)")),
  command: (input) => ({ args: [tinyModel, "--ids", "-", "--gen", "2", "--out", "-"], stdin: input, names: ["--ids", "--gen", "prompt"] }),
  output: runIds,
};
