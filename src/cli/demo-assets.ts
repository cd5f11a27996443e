/**
 * The demo model built into k3: a small Kimi K3 (9 layers, 4096-id vocabulary) trained on this
 * project's generated text by tools/train-demo, in the released layout (nested config.json, ten
 * safetensors shards, MXFP4 routed experts) with its own BPE tokenizer that carries the K3
 * control tokens, so `k3 demo`, `k3 chat --demo` and `k3 serve --demo` run with nothing to
 * download. The files are embedded in the executable and copied to a cache directory on first
 * use, because the checkpoint reader opens real files. model.safetensors.index.json stays in
 * assets/demo (it is part of the released layout) but is not embedded: the engine finds the
 * tensors by reading the shards' own headers.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import configFile from "../../assets/demo/config.json" with { type: "file" };
import shard1 from "../../assets/demo/model-00001-of-000010.safetensors" with { type: "file" };
import shard2 from "../../assets/demo/model-00002-of-000010.safetensors" with { type: "file" };
import shard3 from "../../assets/demo/model-00003-of-000010.safetensors" with { type: "file" };
import shard4 from "../../assets/demo/model-00004-of-000010.safetensors" with { type: "file" };
import shard5 from "../../assets/demo/model-00005-of-000010.safetensors" with { type: "file" };
import shard6 from "../../assets/demo/model-00006-of-000010.safetensors" with { type: "file" };
import shard7 from "../../assets/demo/model-00007-of-000010.safetensors" with { type: "file" };
import shard8 from "../../assets/demo/model-00008-of-000010.safetensors" with { type: "file" };
import shard9 from "../../assets/demo/model-00009-of-000010.safetensors" with { type: "file" };
import shard10 from "../../assets/demo/model-00010-of-000010.safetensors" with { type: "file" };
import rankPath from "../../assets/demo/tiktoken.model" with { type: "file" };
import tokenizerConfigFile from "../../assets/demo/tokenizer_config.json" with { type: "file" };
import { envValue } from "../env.ts";
import { K3Error, runtimeError } from "../errors.ts";
import { errnoCode, writeAtomically } from "../fs.ts";
import { version } from "./usage.ts";

/** File name in the demo directory -> embedded path. */
export const demoFiles: Record<string, string> = {
  "config.json": configFile as unknown as string,
  "model-00001-of-000010.safetensors": shard1,
  "model-00002-of-000010.safetensors": shard2,
  "model-00003-of-000010.safetensors": shard3,
  "model-00004-of-000010.safetensors": shard4,
  "model-00005-of-000010.safetensors": shard5,
  "model-00006-of-000010.safetensors": shard6,
  "model-00007-of-000010.safetensors": shard7,
  "model-00008-of-000010.safetensors": shard8,
  "model-00009-of-000010.safetensors": shard9,
  "model-00010-of-000010.safetensors": shard10,
  "tiktoken.model": rankPath,
  "tokenizer_config.json": tokenizerConfigFile as unknown as string,
};

/** What the log line of every command that runs the demo model calls it. */
export const demoModelName = (layers: number): string =>
  `the demo Kimi K3 (${layers} layers, trained here on generated text; see tools/train-demo)`;

/**
 * The demo directory, written out of the executable when missing or different, and returned:
 * it is both the model directory and the tokenizer directory. A file is rewritten unless its
 * bytes are the embedded ones (not just its size: a retrained model has the same shapes).
 */
export function unpackDemo(): string {
  const home = envValue("HOME");
  const cacheRoot = envValue("XDG_CACHE_HOME") ?? (home ? join(home, ".cache") : tmpdir());
  const dir = join(cacheRoot, "k3", `demo-${version}`);
  try {
    mkdirSync(dir, { recursive: true });
    for (const [name, embedded] of Object.entries(demoFiles)) {
      const target = join(dir, name);
      const bytes = readFileSync(embedded);
      if (existsSync(target) && readFileSync(target).equals(bytes)) continue;
      writeAtomically(target, bytes, "a demo file");
    }
  } catch (error) {
    const reason = error instanceof K3Error ? error.message : errnoCode(error);
    throw runtimeError(`${dir}: cannot prepare the demo files (${reason})`);
  }
  return dir;
}
