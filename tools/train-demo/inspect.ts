/**
 * Reads back what data.ts wrote: checks the files' structure and shows documents decoded by the
 * trained tokenizer.
 *
 *   bun tools/train-demo/inspect.ts [--dir DIR] [--split train|heldout] [--kind NAME] [--n N] [--ids]
 *
 * Checks: offsets rise from 0 to the id count, one kind byte per document, every id inside the
 * vocabulary, raw-text documents end with [EOS] and chat documents with <|end_of_msg|>, and the
 * per-kind counts and file hashes equal the manifest's.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadTokenizer } from "../../src/tokenizer/load.ts";
import { controlIds } from "../../src/chat/specials.ts";

interface Options {
  dir: string;
  split: "train" | "heldout";
  kind: string | undefined;
  n: number;
  ids: boolean;
}

function parseArgs(argv: readonly string[]): Options {
  const o: Options = { dir: process.env.K3_TRAIN_DIR || "/var/tmp/k3-train-demo", split: "train", kind: undefined, n: 2, ids: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === "--dir") o.dir = value();
    else if (arg === "--split") {
      const v = value();
      if (v !== "train" && v !== "heldout") throw new Error("--split is train or heldout");
      o.split = v;
    } else if (arg === "--kind") o.kind = value();
    else if (arg === "--n") o.n = Number(value());
    else if (arg === "--ids") o.ids = true;
    else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  o.dir = resolve(o.dir);
  return o;
}

function main(): void {
  const o = parseArgs(process.argv.slice(2));
  const manifest = JSON.parse(readFileSync(join(o.dir, "manifest.json"), "utf8")) as {
    kinds: { id: number; name: string }[];
    files: Record<string, { sha256: string }>;
    train: { per_kind: Record<string, { documents: number; ids: number }> };
    heldout: { per_kind: Record<string, { documents: number; ids: number }> };
  };
  for (const [name, { sha256 }] of Object.entries(manifest.files)) {
    const actual = createHash("sha256").update(readFileSync(join(o.dir, name))).digest("hex");
    if (actual !== sha256) throw new Error(`${name}: sha256 ${actual}, the manifest says ${sha256}`);
  }
  const tokenizer = loadTokenizer(join(o.dir, "tokenizer"));
  const controls = controlIds(tokenizer);
  for (const split of ["train", "heldout"] as const) {
    const idsBuf = readFileSync(join(o.dir, `${split}.u16`));
    const ids = new Uint16Array(idsBuf.buffer, idsBuf.byteOffset, idsBuf.length / 2);
    const offBuf = readFileSync(join(o.dir, `${split}-docs.u32`));
    const offsets = new Uint32Array(offBuf.buffer, offBuf.byteOffset, offBuf.length / 4);
    const kinds = readFileSync(join(o.dir, `${split}-kinds.u8`));
    if (offsets.length !== kinds.length + 1) throw new Error(`${split}: ${offsets.length} offsets for ${kinds.length} documents`);
    if (offsets[0] !== 0 || offsets[offsets.length - 1] !== ids.length) throw new Error(`${split}: offsets do not run from 0 to ${ids.length}`);
    const counted: Record<string, { documents: number; ids: number }> = {};
    for (let d = 0; d < kinds.length; d++) {
      const start = offsets[d] as number;
      const end = offsets[d + 1] as number;
      if (end <= start) throw new Error(`${split} document ${d} is empty or offsets go down`);
      const kind = manifest.kinds.find((k) => k.id === kinds[d]);
      if (kind === undefined) throw new Error(`${split} document ${d}: unknown kind ${kinds[d]}`);
      const last = ids[end - 1];
      const expected = kind.name === "chat" ? controls.endOfMessage : controls.eos;
      if (last !== expected) throw new Error(`${split} document ${d} (${kind.name}) ends with id ${last}, not ${expected}`);
      const entry = (counted[kind.name] ??= { documents: 0, ids: 0 });
      entry.documents++;
      entry.ids += end - start;
    }
    for (const id of ids) if (id >= tokenizer.vocabSize) throw new Error(`${split}: id ${id} is outside the vocabulary`);
    for (const [name, entry] of Object.entries(manifest[split].per_kind)) {
      const c = counted[name] ?? { documents: 0, ids: 0 };
      if (c.documents !== entry.documents || c.ids !== entry.ids) throw new Error(`${split} ${name}: ${JSON.stringify(c)} against the manifest's ${JSON.stringify(entry)}`);
    }
    process.stderr.write(`${split}: ${kinds.length} documents, ${ids.length} ids: structure, kinds, ends and manifest counts check out\n`);
    if (split !== o.split) continue;
    for (const kind of manifest.kinds) {
      if (o.kind !== undefined && o.kind !== kind.name) continue;
      let shown = 0;
      for (let d = 0; d < kinds.length && shown < o.n; d++) {
        if (kinds[d] !== kind.id) continue;
        const docIds = Array.from(ids.subarray(offsets[d] as number, offsets[d + 1] as number));
        process.stdout.write(`--- ${split} document ${d}, ${kind.name}, ${docIds.length} ids\n${tokenizer.decodeText(docIds)}\n`);
        if (o.ids) process.stdout.write(`${docIds.join(",")}\n`);
        shown++;
      }
    }
  }
}

main();
