/**
 * One table of ranges (src/decode/sampling-options.ts), four doors: every sampling knob's
 * boundary values (just inside, just outside, the wrong type) through the run command's flags
 * (dist/k3), `/v1/chat/completions` and `/v1/completions` (a real `k3 serve` over HTTP), and
 * `k3 chat`'s `/set` (its handler in-process). Each door must give the same verdict, and a
 * refusal must name the same knob: the flag on the command line, the field (`param`) over HTTP.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { applySet } from "../../src/cli/chat-set.ts";
import { samplingDefaults, samplingNames, type SamplingKnob } from "../../src/decode/sampling-options.ts";
import { K3Error } from "../../src/errors.ts";
import type { ChatSettings } from "../../src/session/chat-session.ts";
import { expectation, modelDir } from "../support/fixtures.ts";
import { inParallel, k3Async } from "../support/k3-async.ts";
import { serveDemo, stopAll, type Served } from "../support/serve.ts";

afterAll(stopAll);

/** A value as each door takes it: a number, or (the wrong type) text no door may read as one. */
type Value = number | "x";
const table: [SamplingKnob, Value[], Value[]][] = [
  // knob, accepted (the edges and just inside), refused (just outside, the wrong type)
  ["temperature", [0, 2, 1.99], [-0.01, 2.01, "x"]],
  ["topP", [1, 0.001], [0, 1.01, -1, "x"]],
  ["topK", [-1, 0, 1, 50], [-2, 2.5, "x"]],
  ["minP", [0, 1], [-0.01, 1.01, "x"]],
  ["seed", [0, -9007199254740991, 9007199254740991], [9007199254740992, 1.5, "x"]],
  ["presencePenalty", [-2, 2], [-2.01, 2.01, "x"]],
  ["frequencyPenalty", [-2, 2], [-2.01, 2.01, "x"]],
];

type Verdict = "ok" | { refused: string };

const tiny = modelDir("tiny13");
const ids = expectation("tiny13").prompt_ids.slice(0, 4).join(",");

async function viaFlag(knob: SamplingKnob, value: Value): Promise<Verdict> {
  const flag = samplingNames.flag[knob];
  const r = await k3Async([tiny, "--ids", ids, "--gen", "1", "--temperature", knob === "temperature" ? String(value) : "0.5", ...(knob === "temperature" ? [] : [flag, String(value)])]);
  if (r.code === 0) return "ok";
  expect([flag, String(value), r.code]).toEqual([flag, String(value), 2]);
  expect(r.stderr.split("\n").length).toBe(2); // one line
  return { refused: r.stderr.startsWith(`k3: ${flag} `) ? flag : r.stderr };
}

function viaSet(knob: SamplingKnob, value: Value): Verdict {
  const settings: ChatSettings = { system: undefined, thinking: true, effort: "max", sampling: { ...samplingDefaults.chat }, maxNewTokens: 8 };
  const flag = samplingNames.flag[knob];
  try {
    applySet(settings, [flag.slice(2), String(value)]);
    return "ok";
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    return { refused: error.message.startsWith(`${flag} `) ? flag : error.message };
  }
}

async function viaHttp(s: Served, path: "/v1/chat/completions" | "/v1/completions", knob: SamplingKnob, value: Value): Promise<Verdict> {
  const field = samplingNames.field[knob];
  const prompt = path === "/v1/completions" ? { prompt: "Once upon a time" } : { messages: [{ role: "user", content: "Hi" }] };
  const r = await fetch(`${s.url}${path}`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...prompt, max_tokens: 1, [field]: value === "x" ? "x" : value }),
  });
  const body = (await r.json()) as { error?: { param: string | null; message: string } };
  if (r.status === 200) return "ok";
  expect([path, field, value, r.status]).toEqual([path, field, value, 400]);
  return { refused: body.error!.param ?? `no param: ${body.error!.message}` };
}

describe("every sampling knob: one verdict from the flags, both endpoints and /set", () => {
  test("boundary values, just outside them, and the wrong type", async () => {
    const s = await serveDemo();
    // The flag door's dist/k3 runs, four at a time, while the server is asked one request after another.
    const values = table.flatMap(([knob, accepted, refused]) => [...accepted, ...refused].map((value) => ({ knob, value })));
    const [flags, http] = await Promise.all([
      inParallel(values, 4, ({ knob, value }) => viaFlag(knob, value)),
      (async () => {
        const out: { chat: Verdict; completions: Verdict }[] = [];
        for (const { knob, value } of values) {
          out.push({ chat: await viaHttp(s, "/v1/chat/completions", knob, value), completions: await viaHttp(s, "/v1/completions", knob, value) });
        }
        return out;
      })(),
    ]);
    const disagreements: string[] = [];
    let checked = 0;
    for (const [knob, accepted, refused] of table) {
      const flag = samplingNames.flag[knob];
      const field = samplingNames.field[knob];
      for (const value of [...accepted, ...refused]) {
        const want = accepted.includes(value) ? "ok" : "refused";
        const i = checked; // values lists the same knobs and values in this order
        const verdicts = { flag: flags[i]!, set: viaSet(knob, value), chat: http[i]!.chat, completions: http[i]!.completions };
        const expected = { flag: want === "ok" ? "ok" : { refused: flag }, set: want === "ok" ? "ok" : { refused: flag },
          chat: want === "ok" ? "ok" : { refused: field }, completions: want === "ok" ? "ok" : { refused: field } };
        if (JSON.stringify(verdicts) !== JSON.stringify(expected)) disagreements.push(`${knob} ${value}: ${JSON.stringify(verdicts)}`);
        checked++;
      }
    }
    expect(disagreements).toEqual([]);
    expect(checked).toBe(table.reduce((n, [, a, r]) => n + a.length + r.length, 0));
    expect(await s.stop()).toBe(0);
  }, 120_000);
});
