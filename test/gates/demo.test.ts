/**
 * The demo model (assets/demo, trained by tools/train-demo) against a third implementation, the
 * torch model of tools/train-demo, which made test/fixtures/demo with make_fixtures.py from the
 * exported files; and whether it speaks. Held-out prompts only (the data generator's held-out
 * stream): 24 text prompts and 24 chat requests rendered as `k3 serve` renders them.
 *
 * Gates: the greedy ids resident (every case, each chat reply to its stop id), streamed from a
 * packed trunk with one ring slot and a minimal expert cache (every other case, 16 ids), and by
 * speculative decode (the other cases, whole); the first step's logits on every path and the last
 * step's resident, within the model.md 8.5 budget. Ids are compared up to the first step whose
 * top-2 gap is under twice the budget (`compare_steps`), where the two could swap legitimately.
 *
 * Quality, from the resident runs: of the words generated after the text prompts, at least 95%
 * are dictionary words (the word-list package, with the data generator's definition of a word,
 * tools/train-demo/words.ts); of the chat replies, at least 90% parse into the reasoning (thinking
 * on) and either a non-empty answer ended by a stop id (finish "stop") or, with tools declared,
 * a complete tool call (finish "tool_calls"). The shares are printed.
 *
 * The runs are child processes (test/support/demo-runs.ts: the engine in-process, with the
 * ReleaseFast kernels), so they cost seconds, not minutes under the safety-checked library; four
 * (demoJobs: resident in two halves, streamed, speculative), joined by demoRuns; the preload
 * starts them at the beginning of a run that includes this file (support/early.ts).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { finishReason } from "../../src/chat/finish.ts";
import { parseReply } from "../../src/chat/reply-message.ts";
import { parseChatRequest } from "../../src/chat/request.ts";
import { controlIds, stopIds } from "../../src/chat/specials.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { loadDictionary, wordsOf } from "../../tools/train-demo/words.ts";
import { demoDir, demoFixtureDir, readDemoExpectation } from "../support/demo.ts";
import { demoRuns, type DemoRuns, type PathRuns } from "../support/demo-runs.ts";
import { readF32 } from "../support/fixtures.ts";

const want = readDemoExpectation();
const V = want.vocab;
const torchFirst = readF32(join(demoFixtureDir, want.logits_files.first));
const torchLast = readF32(join(demoFixtureDir, want.logits_files.last));

let runs: DemoRuns;
let out = "";
beforeAll(async () => {
  ({ runs, out } = await demoRuns());
  const s = (p: PathRuns) => `${p.seconds.toFixed(1)} s`;
  console.log(`demo runs: resident ${s(runs.resident)}, streamed ${s(runs.streamed)}, speculative ${s(runs.speculative)}`);
}, 600_000);

/** The worst max |got - torch| / budget over the rows of a logits file, row r of `got` against case cases[r]. */
function worstRatio(got: Float32Array, torch: Float32Array, cases: readonly number[]): number {
  let worst = 0;
  cases.forEach((c, r) => {
    let diff = 0;
    let top = 0;
    for (let i = 0; i < V; i++) {
      const ref = torch[c * V + i] as number;
      diff = Math.max(diff, Math.abs((got[r * V + i] as number) - ref));
      top = Math.max(top, Math.abs(ref));
    }
    worst = Math.max(worst, diff / (want.tolerance.rel * top));
  });
  return worst;
}

function idMismatches(path: PathRuns, limit = Number.POSITIVE_INFINITY): string[] {
  const bad: string[] = [];
  path.cases.forEach((c, r) => {
    const fixture = want.cases[c]!;
    const n = Math.min(fixture.compare_steps, limit, path.ids[r]!.length);
    const got = path.ids[r]!.slice(0, n).join(",");
    if (got !== fixture.generated_ids.slice(0, n).join(",")) bad.push(`${fixture.kind} ${fixture.index}: ${got} vs ${fixture.generated_ids.slice(0, n).join(",")}`);
    // A path must not stop before the compared part either.
    if (path.ids[r]!.length < Math.min(fixture.compare_steps, limit)) bad.push(`${fixture.kind} ${fixture.index}: stopped after ${path.ids[r]!.length} ids`);
  });
  return bad;
}

describe("demo model: k3 = torch on held-out prompts", () => {
  test("the fixture: at least 20 prompts of each kind, most steps compared", () => {
    for (const kind of ["text", "chat"] as const) expect(want.cases.filter((c) => c.kind === kind).length).toBeGreaterThanOrEqual(20);
    const steps = want.cases.reduce((n, c) => n + c.generated_ids.length, 0);
    const compared = want.cases.reduce((n, c) => n + c.compare_steps, 0);
    console.log(`demo fixture: ${compared} of ${steps} greedy ids compared (${((compared / steps) * 100).toFixed(0)}%; the rest follow a near-tie)`);
    expect(compared / steps).toBeGreaterThan(0.8);
  });

  test("resident: every case's greedy ids, and the first and last step's logits", () => {
    expect(idMismatches(runs.resident)).toEqual([]);
    const first = worstRatio(readF32(join(out, "resident-first.f32")), torchFirst, runs.resident.cases);
    const last = worstRatio(readF32(join(out, "resident-last.f32")), torchLast, runs.resident.cases);
    console.log(`demo resident: worst logits at ${(first * 100).toFixed(2)}% (first step) and ${(last * 100).toFixed(2)}% (last step) of the 8.5 budget`);
    expect(Math.max(first, last)).toBeLessThanOrEqual(1);
  });

  test("streamed, one ring slot, expert cache of top-k + 1: ids and first-step logits", () => {
    expect(runs.streamed.cases.length).toBeGreaterThanOrEqual(20);
    expect(idMismatches(runs.streamed, 16)).toEqual([]);
    expect(worstRatio(readF32(join(out, "streamed-first.f32")), torchFirst, runs.streamed.cases)).toBeLessThanOrEqual(1);
  });

  test("speculative decode (--spec 4): ids and first-step logits, with drafts accepted", () => {
    const s = runs.speculative;
    expect(s.cases.length).toBeGreaterThanOrEqual(20);
    expect(idMismatches(s)).toEqual([]);
    expect(worstRatio(readF32(join(out, "speculative-first.f32")), torchFirst, s.cases)).toBeLessThanOrEqual(1);
    console.log(`demo --spec 4: ${s.drafted} ids drafted, ${s.accepted} accepted`);
    expect(s.accepted!).toBeGreaterThan(0);
  });
});

describe("demo model: it speaks", () => {
  const tokenizer = loadTokenizer(demoDir);

  test("text: at least 95% of the generated words are dictionary words", () => {
    const dictionary = loadDictionary();
    let words = 0;
    const unknown: string[] = [];
    runs.resident.cases.forEach((c, r) => {
      if (want.cases[c]!.kind !== "text") return;
      for (const word of wordsOf(tokenizer.decodeText(runs.resident.ids[r]!))) {
        words++;
        if (!dictionary.has(word)) unknown.push(word);
      }
    });
    const share = (words - unknown.length) / words;
    console.log(`demo text: ${words - unknown.length} of ${words} generated words are dictionary words (${(share * 100).toFixed(1)}%)${unknown.length ? `; not: ${unknown.join(", ")}` : ""}`);
    expect(words).toBeGreaterThan(20 * 15);
    expect(share).toBeGreaterThanOrEqual(0.95);
  });

  test("chat: at least 90% of the replies parse into reasoning and an answer (or a tool call)", () => {
    const stops = stopIds(controlIds(tokenizer));
    const failures: string[] = [];
    let chats = 0;
    runs.resident.cases.forEach((c, r) => {
      const fixture = want.cases[c]!;
      if (fixture.kind !== "chat") return;
      chats++;
      const request = parseChatRequest(fixture.request, { source: `chat case ${fixture.index}` });
      const ids = runs.resident.ids[r]!;
      const { message } = parseReply(tokenizer, ids, { thinking: request.thinking });
      const finish = finishReason(stops.has(ids.at(-1)!) ? "stop" : "length", (message.tool_calls?.length ?? 0) > 0);
      const reasoned = !request.thinking || (message.reasoning_content ?? "").trim().length > 0;
      const answered = finish === "stop" && (message.content ?? "").trim().length > 0;
      const called = finish === "tool_calls" && request.tools.length > 0;
      if (!(reasoned && (answered || called))) failures.push(`case ${fixture.index} (${finish}): ${JSON.stringify(message).slice(0, 160)}`);
    });
    const share = (chats - failures.length) / chats;
    console.log(`demo chat: ${chats - failures.length} of ${chats} replies structured (${(share * 100).toFixed(0)}%)${failures.length ? `; not: ${failures.join(" | ")}` : ""}`);
    expect(chats).toBeGreaterThanOrEqual(20);
    expect(share).toBeGreaterThanOrEqual(0.9);
  });
});
