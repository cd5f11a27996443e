/**
 * `bun run train-demo`: the demo model from nothing, in one command (about 1.5 hours on the 2-core
 * development machine, see README.md here). Each stage is skipped when its output is already there
 * and current, so running it again resumes: the data (bun, data.ts: skipped when DIR/manifest.json
 * hashes to data-manifest.json's record), the training (python, train.py: resumes from its own
 * checkpoint), the export into assets/demo (train.py), the held-out prompt ids (prompt-ids.ts) and
 * the torch fixtures bun test checks k3 against (make_fixtures.py).
 *
 * Python with the packages of requirements.txt: `K3_TRAIN_PYTHON` (default python3).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { consola } from "consola";

const here = import.meta.dir;
const dir = process.env.K3_TRAIN_DIR || "/var/tmp/k3-train-demo";
const python = process.env.K3_TRAIN_PYTHON || "python3";

function run(what: string, cmd: string[]): void {
  consola.start(`${what}: ${cmd.join(" ")}`);
  const r = Bun.spawnSync(cmd, { cwd: here, stdio: ["inherit", "inherit", "inherit"], env: { ...process.env, K3_TRAIN_DIR: dir } });
  if (r.exitCode !== 0) {
    consola.error(`${what} failed (exit ${r.exitCode})`);
    process.exit(1);
  }
}

const probe = Bun.spawnSync([python, "-c", "import torch, numpy"], { stderr: "pipe" });
if (probe.exitCode !== 0) {
  consola.error(`${python} cannot import torch and numpy: install tools/train-demo/requirements.txt (or set K3_TRAIN_PYTHON to a Python that has them)`);
  process.exit(1);
}
const record = JSON.parse(readFileSync(join(here, "data-manifest.json"), "utf8")) as { data_sha256: string };
const manifest = join(dir, "manifest.json");
const current = existsSync(manifest) && createHash("sha256").update(readFileSync(manifest)).digest("hex") === record.data_sha256;
if (current) consola.info(`data: ${dir} holds the recorded data (sha256 ${record.data_sha256.slice(0, 16)})`);
else run("data", ["bun", "data.ts", "--out", dir]);
run("training and export", [python, "train.py", "--data", dir, "--out", resolve(here, "../../assets/demo")]);
run("held-out prompt ids", ["bun", "prompt-ids.ts", "--dir", dir]);
run("fixtures", [python, "make_fixtures.py", "--prompts", join(dir, "heldout-prompt-ids.json")]);
consola.success("assets/demo and test/fixtures/demo are the trained demo; bun test checks k3 against them");
