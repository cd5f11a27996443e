/**
 * Speculative decode on the K3-width checkpoint at the 1.5 GB streamed budget (issue 13):
 *   1. what a fully accepted draft of 4 gains: one forward over 1 + 4 positions (a verification
 *      sweep) against 5 serial one-id steps; the streamed trunk is read once per forward either
 *      way, so the sweep should cost far less than the five steps;
 *   2. `--spec 4` against plain decode over a longer generation from a repetitive prompt: both
 *      runs' s/token and the acceptance statistics, as measured (random weights make few
 *      agreeing n-grams), and the ids compared (they must be equal).
 *
 * `bun run bench/speculative.ts` alone, or part of `bun run bench`.
 */
import { executablePath } from "../tools/build.ts";
import { benchPaths, ensureExecutable, prepare, type StreamingPaths } from "./streaming.ts";

const progress = (line: string) => process.stderr.write(`[speculative] ${line}\n`);
const cacheGb = 2;
const generation = 24;

interface RunJson {
  generated_ids: number[];
  seconds_per_token: number;
  steps: { seconds: number }[];
  speculation: { sweeps: number; drafted: number; accepted: number; emitted: number } | null;
}

async function run(paths: StreamingPaths, label: string, args: string[]): Promise<RunJson> {
  progress(label);
  const all = [paths.dir, "--trunk", paths.trunkDir, "--trunk-gb", "1.5", "--cache-gb", String(cacheGb), ...args, "--out", "-"];
  const child = Bun.spawn([executablePath, ...all], { stdin: "ignore", stdout: "pipe", stderr: "ignore" });
  const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  if (code !== 0) throw new Error(`${label}: dist/k3 exited ${code}`);
  return JSON.parse(stdout) as RunJson;
}

const ids = (n: number, salt: number) => Array.from({ length: n }, (_, i) => 1 + (((i + salt) * 2654435761) >>> 0) % 4000);

export interface SpeculativeBench {
  sweepSeconds: number;
  serialSeconds: number;
  plain: RunJson;
  spec: RunJson;
  identical: boolean;
}

export async function benchSpeculative(paths = benchPaths()): Promise<SpeculativeBench> {
  await ensureExecutable();
  await prepare(paths);
  // Step 0 of a 5-id prompt: in one forward (the sweep's shape), or one id per forward.
  const five = ids(5, 17).join(",");
  const sweep = await run(paths, "5 positions in one forward", ["--ids", five, "--gen", "1", "--prefill-chunk", "5"]);
  const serial = await run(paths, "5 positions one at a time", ["--ids", five, "--gen", "1", "--prefill-chunk", "1"]);
  const base = ids(12, 3);
  const lead = (await run(paths, "the repetitive prompt's continuation", ["--ids", base.join(","), "--gen", "8"])).generated_ids;
  const repetitive = [...base, ...lead, ...base].join(",");
  const plain = await run(paths, `plain decode, ${generation} tokens`, ["--ids", repetitive, "--gen", String(generation)]);
  const spec = await run(paths, `--spec 4, ${generation} tokens`, ["--ids", repetitive, "--gen", String(generation), "--spec", "4"]);
  return {
    sweepSeconds: (sweep.steps[0] as { seconds: number }).seconds, serialSeconds: (serial.steps[0] as { seconds: number }).seconds, plain, spec,
    identical: JSON.stringify(plain.generated_ids) === JSON.stringify(spec.generated_ids),
  };
}

/** Steady-state seconds per token: every step but step 0 (the prefill). */
const decodeSecondsPerToken = (r: RunJson) => r.steps.slice(1).reduce((a, s) => a + s.seconds, 0) / Math.max(1, r.steps.length - 1);

export function speculativeReport(b: SpeculativeBench): string {
  const s = b.spec.speculation;
  return [
    `speculative (K3-width, 1.5 GB streamed trunk, ${cacheGb} GB expert cache):`,
    `  one sweep over 1 + 4 positions ${b.sweepSeconds.toFixed(2)} s against 5 serial steps ${b.serialSeconds.toFixed(2)} s: ` +
      `a fully accepted draft is ${(b.serialSeconds / b.sweepSeconds).toFixed(2)}x faster (issue 13 expects >= 3x)`,
    `  ${generation} tokens from a repetitive prompt: plain ${decodeSecondsPerToken(b.plain).toFixed(3)} s/token, --spec 4 ${decodeSecondsPerToken(b.spec).toFixed(3)} s/token ` +
      `(${(decodeSecondsPerToken(b.plain) / decodeSecondsPerToken(b.spec)).toFixed(2)}x); ` +
      `${s ? `${s.sweeps} sweeps, ${s.drafted} drafted, ${s.accepted} accepted, ${s.emitted} emitted by sweeps` : "no speculation figures"}; ` +
      `ids ${b.identical ? "identical" : "FAIL: DIFFERENT"}`,
  ].join("\n");
}

if (import.meta.main) console.log(speculativeReport(await benchSpeculative()));
