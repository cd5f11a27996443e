/**
 * README's commands, run as a user would type them: every line of its ```sh blocks is classified
 * (install, the released model, the demo, the server, a client), and each line that runs on the
 * demo model runs through dist/k3 (as `k3` on PATH, from an empty directory with a fresh cache)
 * and must exit 0 with output. `k3 serve --demo` is started, then README's curl line and its
 * TypeScript client are run against it. A line no rule claims fails the test, so README cannot
 * gain a command that nobody runs. README's shape is held here too: short, Install or Quick start
 * near the top, few dated lines.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { executablePath } from "../../tools/build.ts";
import { tempDir } from "../support/tmp.ts";

const root = resolve(import.meta.dir, "../..");
const readme = readFileSync(join(root, "README.md"), "utf8");

interface Block {
  lang: string;
  text: string;
}

function blocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1] ?? "", text: m[2] ?? "" }));
}

/** A shell line without its trailing comment (two spaces or more, then `#`, outside quotes). */
function commandOf(line: string): string {
  return line.replace(/\s{2,}#.*$/, "").trim();
}

/** sh lines, continuation lines joined. */
function shellLines(markdown: string): string[] {
  const lines: string[] = [];
  for (const block of blocks(markdown).filter((b) => b.lang === "sh")) {
    let pending = "";
    for (const raw of block.text.split("\n")) {
      const line = commandOf(raw);
      if (line === "") continue;
      if (line.endsWith("\\")) {
        pending += `${line.slice(0, -1).trimEnd()} `;
        continue;
      }
      lines.push(pending + line);
      pending = "";
    }
  }
  return lines;
}

/**
 * What runs where: the install lines in .ci/run and .ci/non-root, `k3 doctor` with no model in
 * test/cli/doctor-tools.test.ts, the released model's lines nowhere (it is not on this machine),
 * and the rest here.
 */
type Kind = "install" | "doctor" | "released-model" | "key" | "serve" | "client" | "demo" | "agent";
const rules: [Kind, RegExp][] = [
  ["install", /^(bash tools\/setup\.sh|\.toolchain\/bin\/bun test|sha256sum |chmod \+x |export PATH=)/],
  ["doctor", /^k3 doctor$/],
  ["released-model", /~\/models|<model_dir>|<dir>/],
  ["key", /^export K3_API_KEY=/],
  ["serve", /^k3 serve --demo\b/],
  ["client", /^curl /],
  // A coding agent pointed at the server: the agent CLIs are not dependencies, so the line is classified, not run (docs/serving.md says how they were tried).
  ["agent", /^ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:\d+ .*\bclaude$/],
  ["demo", /(^|[|;&(]\s*)k3 (demo\b|chat --demo\b)|"\$demo"/],
];

function kindOf(line: string): Kind | undefined {
  return rules.find(([, pattern]) => pattern.test(line))?.[0];
}

const lines = shellLines(readme);
const work = tempDir("readme");
const bin = join(work, "bin");
const home = join(work, "home");
Bun.spawnSync(["mkdir", "-p", bin, home, join(work, "cwd")]);
symlinkSync(executablePath, join(bin, "k3"));
const apiKey = "readme-test-key";
const env = {
  PATH: `${bin}:/usr/bin:/bin`, HOME: home, XDG_CACHE_HOME: join(home, ".cache"), K3_THREADS: process.env.K3_THREADS ?? "1", K3_API_KEY: apiKey,
};
const hasJq = Bun.spawnSync(["sh", "-c", "command -v jq"]).exitCode === 0;

async function sh(line: string, extraEnv: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  // `demo` holds the demo's model directory, as README's pipeline block sets it.
  const script = `set -eo pipefail\ndemo="$(k3 demo --model-dir)"\n${line}\n`;
  const child = Bun.spawn(["bash", "-c", script], { cwd: join(work, "cwd"), env: { ...env, ...extraEnv }, stdin: new TextEncoder().encode("Hello\n"), stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

describe("README", () => {
  test("is for users: short, Install or Quick start near the top, few dated lines", () => {
    const all = readme.split("\n");
    expect(all.length).toBeLessThanOrEqual(450);
    const firstHeading = all.findIndex((l) => /^## (Install|Quick start)/.test(l));
    expect(firstHeading).toBeGreaterThanOrEqual(0);
    expect(firstHeading).toBeLessThan(60);
    expect(all.filter((l) => /\b20\d\d-\d\d-\d\d\b/.test(l)).length).toBeLessThanOrEqual(5);
  });

  test("every command line belongs to one kind, and each kind the tests run is there", () => {
    const unclaimed = lines.filter((l) => kindOf(l) === undefined);
    expect(unclaimed).toEqual([]);
    const kinds = new Set(lines.map(kindOf));
    for (const kind of ["install", "doctor", "released-model", "serve", "client", "demo"] as const) expect(kinds).toContain(kind);
  });

  test("the classifier can fail: a command on nothing it knows is unclaimed", () => {
    expect(kindOf("k3 /srv/other-model --ids 1,2")).toBeUndefined();
    expect(kindOf("rm -rf build")).toBeUndefined();
    expect(kindOf("k3 demo --gen 4")).toBe("demo");
    expect(kindOf('printf x | k3 tokenize --tok "$demo"')).toBe("demo");
  });

  test("`k3 demo` prints what README shows it printing", async () => {
    const quick = readme.slice(readme.indexOf("## Quick start"));
    const shown = blocks(quick);
    expect(shown[0]?.text.trim()).toBe("k3 demo");
    const { code, stdout } = await sh("k3 demo");
    expect(code).toBe(0);
    expect(stdout).toBe(shown[1]?.text ?? "(no output block)");
  }, 60_000);

  const demoLines = lines.filter((l) => kindOf(l) === "demo");
  for (const line of demoLines) {
    test(`runs: ${line.length > 90 ? `${line.slice(0, 87)}...` : line}`, async () => {
      if (/\bjq\b/.test(line) && !hasJq) {
        console.warn(`skipped (jq is not installed): ${line}`);
        return;
      }
      // An assignment prints nothing: what it assigns must then be the demo's directory.
      const assigns = /^demo=/.test(line);
      const { code, stdout, stderr } = await sh(assigns ? `${line}\n[ -f "$demo/config.json" ]` : line);
      if (code !== 0) throw new Error(`exit ${code}: ${line}\n${stderr.slice(-2000)}`);
      if (!assigns) expect(stdout.length + stderr.length).toBeGreaterThan(0);
      if (/^k3 demo --model-dir$/.test(line)) expect(stdout.trim().startsWith(join(home, ".cache", "k3", "demo-"))).toBe(true);
    }, 60_000);
  }

  describe("the server block", () => {
    let server: ReturnType<typeof Bun.spawn> | undefined;
    afterAll(async () => {
      server?.kill("SIGTERM");
      await server?.exited;
    });

    test("`k3 serve --demo` starts, and README's curl line and TypeScript client get answers", async () => {
      const serveLine = lines.find((l) => kindOf(l) === "serve") as string;
      const args = serveLine.replace(/^k3 /, "").replace(/--port \d+/, "").split(/\s+/).filter(Boolean);
      server = Bun.spawn([join(bin, "k3"), ...args, "--port", "0"], { cwd: join(work, "cwd"), env, stdin: "ignore", stdout: "ignore", stderr: "pipe" });
      const reader = (server.stderr as ReadableStream<Uint8Array>).getReader();
      let log = "";
      const deadline = Date.now() + 30_000;
      let url: string | undefined;
      while (url === undefined) {
        if (Date.now() > deadline) throw new Error(`k3 serve did not start:\n${log}`);
        const { value, done } = await reader.read();
        if (done) throw new Error(`k3 serve exited:\n${log}`);
        log += new TextDecoder().decode(value);
        url = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)?.[1];
      }
      void (async () => { for (;;) if ((await reader.read()).done) break; })();
      const port = new URL(url).port;
      const onPort = (text: string) => text.replaceAll("127.0.0.1:8000", `127.0.0.1:${port}`);

      const curl = lines.find((l) => kindOf(l) === "client") as string;
      const answer = await sh(onPort(curl));
      expect(answer.code).toBe(0);
      expect(answer.stdout).toContain("data: [DONE]");
      expect(answer.stdout).toContain('"object":"chat.completion.chunk"');
      // The key is required: without it the same line is refused.
      const refused = await sh(onPort(curl), { K3_API_KEY: "wrong" });
      expect(refused.stdout).toContain("invalid_api_key");

      const client = blocks(readme).find((b) => b.lang === "ts" && b.text.includes("new OpenAI("));
      expect(client).toBeDefined();
      const script = join(root, "test", `.readme-client-${process.pid}.ts`);
      writeFileSync(script, onPort(client?.text ?? ""));
      try {
        const run = Bun.spawnSync([process.execPath, script], { cwd: root, env: { ...process.env, K3_API_KEY: apiKey }, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
        if (run.exitCode !== 0) throw new Error(`the README client failed: ${run.stderr.toString().slice(-2000)}`);
        expect(run.stdout.toString().trim().length).toBeGreaterThan(0);
      } finally {
        Bun.spawnSync(["rm", "-f", script]);
      }
    }, 90_000);
  });
});
