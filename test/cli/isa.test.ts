/**
 * Kernel variants through dist/k3: `--version` and the run report name the variant in use (and
 * on v4 where it takes the CPU's vector operations to issue),
 * K3_ISA forces each one this machine runs with identical ids and logits, and a variant the
 * CPU lacks is refused (exit 1, one line) before the model is read.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { availableIsas } from "../support/kernel-hooks.ts";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const prompt = want.prompt_ids.join(",");
const variants = availableIsas();
const widest = variants.at(-1) as string;
/** Whether /proc/cpuinfo names an Intel CPU: the library then plans for conversions on the multiply-add ports. */
const intel = existsSync("/proc/cpuinfo") && /^vendor_id\s*:\s*GenuineIntel$/m.test(readFileSync("/proc/cpuinfo", "utf8"));

describe.concurrent("kernel variants through dist/k3", () => {
  test("--version names the variant chosen from the CPU and every variant this machine runs", async () => {
    const r = await k3Async(["--version"], { isolated: true });
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[1]).toMatch(new RegExp(`^kernels: ${widest} \\([^)]+\\); this machine runs ${variants.join(", ")} \\(K3_ISA forces one\\)$`));
    expect((await k3Async(["--version"], { isolated: true, env: { K3_ISA: "scalar" } })).stdout.split("\n")[1]).toStartWith("kernels: scalar (scalar reference, plain loops);");
  });

  test("K3_ISA forces each variant: the report and the results name it; ids and logits are identical", async () => {
    const runs = await Promise.all(variants.map(async (isa) => {
      const dir = tempDir(`isa-${isa}`);
      const logits = join(dir, "logits.f32");
      const r = await k3Async([tiny, "--ids", prompt, "--gen", "6", "--dump-logits", logits, "--out", "-"], { env: { K3_ISA: isa } });
      expect(r.code).toBe(0);
      const results = JSON.parse(r.stdout);
      expect(results.plan.kernels.isa).toBe(isa);
      // The text is the contract here: the report names the variant (with the figures the results carry).
      const { description, threads, vector_ports: ports } = results.plan.kernels;
      expect(r.stderr).toContain(`kernels: ${isa} (${description}), ${threads} thread${threads === 1 ? "" : "s"}`);
      // zig/pool.zig `VectorPorts`, set from the CPU's vendor; only v4's report names it
      expect(ports).toBe(intel ? "onFmaPorts" : "besideFma");
      const portsText = ports === "onFmaPorts" ? "on the multiply-add ports" : "beside the multiply-adds";
      if (isa === "v4") expect(r.stderr).toContain(`thread${threads === 1 ? "" : "s"}, vector shuffles and conversions ${portsText}\n`);
      else expect(r.stderr).not.toContain("vector shuffles and conversions");
      return { isa, ids: results.generated_ids as number[], logits: readFileSync(logits) };
    }));
    expect(runs.length).toBeGreaterThanOrEqual(2);
    for (const run of runs) {
      expect(run.ids).toEqual(want.generated_ids.slice(0, 6));
      expect(`${run.isa}: ${Buffer.compare(run.logits, runs[0]!.logits)}`).toBe(`${run.isa}: 0`);
    }
  }, 60_000);

  test("without K3_ISA the widest variant runs; a CPU without it gets the next one", async () => {
    // The variant in use as the results file records it (the report's line is checked above).
    expect(JSON.parse((await k3Async([tiny, "--ids", prompt, "--gen", "1", "--out", "-"])).stdout).plan.kernels.isa).toBe(widest);
    if (widest === "v4") {
      const r = await k3Async([tiny, "--ids", prompt, "--gen", "1", "--out", "-"], { env: { K3_INJECT_MISSING_ISA: "v4" } });
      expect(r.code).toBe(0);
      const kernels = JSON.parse(r.stdout).plan.kernels;
      expect(kernels).toMatchObject({ isa: "v3", description: "x86-64-v3: AVX2 + FMA" });
      expect(kernels.runnable).not.toContain("v4");
    }
  });

  // The refusals' text is the contract: there are no results to read.
  test("K3_ISA naming a variant this CPU lacks: exit 1, one line, nothing read", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "1", "--out", "-"], { env: { K3_ISA: "v4", K3_INJECT_MISSING_ISA: "v4" } });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^k3: K3_ISA=v4: this CPU lacks x86-64-v4 \(AVX-512 F, BW, CD, DQ, VL\); it runs scalar(, \w+)*\n$/);
  });

  test("K3_ISA naming no variant: exit 2, one line", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "1"], { env: { K3_ISA: "avx9000" } });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: K3_ISA must be one of scalar, v3, v4, neon (got 'avx9000')\n");
  });
});
