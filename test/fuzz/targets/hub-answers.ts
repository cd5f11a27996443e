/**
 * What the Hugging Face Hub answers k3 download (src/hub/hub-response.ts): the revision info and
 * the recursive tree listing, as JSON text a mirror or a proxy could send. In process only: in
 * the binary these arrive over HTTP (test/cli/download.test.ts serves hostile ones).
 */
import { joinTreePages, parseJsonText, parseRevisionInfo, parseTreePage } from "../../../src/hub/hub-response.ts";
import { text, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

const sha = "0123456789abcdef0123456789abcdef01234567";
const sha256 = "d88b0d6a6ff9c3f8151f9d3228f57092aaea997f09af009eefd7373a77b5abb9";

const tree = JSON.stringify([
  { type: "directory", oid: sha, path: "weights" },
  { type: "file", oid: sha, size: 554, path: "config.json" },
  { type: "file", oid: sha, size: 17547264, path: "model-00001-of-000096.safetensors", lfs: { oid: sha256, size: 17547264, pointerSize: 134 }, xetHash: "ab" },
  { type: "file", oid: sha, size: 3, path: "weights/tokenizer/tiktoken.model" },
]);
const revision = JSON.stringify({ id: "moonshotai/Kimi-K3", sha, lastModified: "2026-01-01T00:00:00.000Z", siblings: [{ rfilename: "config.json" }] });

export const hubAnswersTarget: FuzzTarget = {
  name: "hub-answers",
  about: "k3 download's Hub answers: parseRevisionInfo, parseTreePage + joinTreePages (paths, sizes, oids, LFS)",
  seeds: () => [{ label: "tree listing", bytes: utf8(tree) }, { label: "revision info", bytes: utf8(revision) }] as Seed[],
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse(input, seed) {
    const body = parseJsonText(text(input), seed.label);
    if (seed.label === "revision info") return JSON.stringify(parseRevisionInfo(body, seed.label));
    return JSON.stringify(joinTreePages([parseTreePage(body, seed.label)], [".k3-download.json"], seed.label));
  },
};
