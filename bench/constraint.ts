/**
 * What a constraint costs per generated id (chat.md 4.8; src/chat/reply-constraint.ts): the mask of the
 * next id (XGrammar's, narrowed by k3's UTF-8 guard), the masked copy of the logits, and the
 * advance on the chosen id, over a valid reply for three schemas (flat, nested with arrays and
 * anyOf, $ref), on the demo vocabulary (4,096 ids) and on the released Kimi vocabulary (163,840
 * ids, skipped without ../shared/kimi-tokenizer). The limit is the demo model's own decode step
 * measured here, the cheapest step there is: the released model's is seconds.
 *
 *   bun run bench/constraint.ts          (also part of `bun run bench`)
 */
import { join, resolve } from "node:path";
import { ReplyConstraint } from "../src/chat/reply-constraint.ts";
import { replyShape } from "../src/chat/reply-shape.ts";
import { parseChatRequest } from "../src/chat/request.ts";
import { controlIds } from "../src/chat/specials.ts";
import { loadConfig } from "../src/checkpoint/config.ts";
import { maskLogits } from "../src/decode/constraint.ts";
import { decode } from "../src/decode/loop.ts";
import { openEngine } from "../src/engine/open.ts";
import { budgetRequest } from "../src/plan/budget.ts";
import { loadTokenizer, type Tokenizer } from "../src/tokenizer/index.ts";
import { gbToBytes } from "../src/units.ts";
import { KIMI_DIR } from "../test/fixtures/tokenizer/support.ts";
import { Figures, type PartReport } from "./results.ts";

const root = resolve(import.meta.dir, "..");
const demoDir = join(root, "assets", "demo");

const schemas: { name: string; schema: object; reply: string }[] = [
  {
    name: "flat", schema: { type: "object", properties: { name: { type: "string" }, age: { type: "integer" }, ok: { type: "boolean" } }, required: ["name", "age", "ok"] },
    reply: '{"name": "Ada Lovelace, who wrote the first program", "age": 36, "ok": true}',
  },
  {
    name: "nested", schema: {
      type: "object", properties: {
        owner: { type: "object", properties: { name: { type: "string" }, pets: { type: "array", items: { enum: ["cat", "dog", "owl"] }, minItems: 1, maxItems: 4 } }, required: ["name", "pets"] },
        score: { anyOf: [{ type: "integer" }, { type: "null" }] },
      }, required: ["owner", "score"],
    },
    reply: '{"owner": {"name": "Sam from the house by the river", "pets": ["cat", "owl", "dog"]}, "score": 12}',
  },
  {
    name: "refs", schema: {
      $defs: { point: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" }, label: { type: "string" } }, required: ["x", "y", "label"] } },
      type: "object", properties: { from: { $ref: "#/$defs/point" }, to: { $ref: "#/$defs/point" } }, required: ["from", "to"],
    },
    reply: '{"from": {"x": 1, "y": 2, "label": "the old mill"}, "to": {"x": 30, "y": 41, "label": "the bridge"}}',
  },
];

export interface ConstraintRow {
  vocab: string;
  vocabSize: number;
  schema: string;
  ids: number;
  forced: number;
  /** Per id: the median and the slowest, milliseconds. */
  medianMs: number;
  maxMs: number;
  compileMs: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

async function measure(tokenizer: Tokenizer, vocab: string): Promise<ConstraintRow[]> {
  const close = controlIds(tokenizer).close;
  const rows: ConstraintRow[] = [];
  for (const { name, schema, reply } of schemas) {
    const request = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], thinking: { type: "disabled" }, response_format: { type: "json_schema", json_schema: { name, schema } } });
    const started = performance.now();
    const shape = await replyShape(request, tokenizer);
    const compileMs = performance.now() - started;
    const ids = [...tokenizer.encode(reply, { ordinary: true }), close];
    const times: number[] = [];
    let forced = 0;
    // Three passes: the first pays for first use; each pass is a fresh reply.
    for (let pass = 0; pass < 3; pass++) {
      const constraint = new ReplyConstraint(shape!, tokenizer, tokenizer.vocabSize);
      const logits = new Float32Array(tokenizer.vocabSize);
      for (const id of ids) {
        const t = performance.now();
        const mask = await constraint.allowed();
        if (!mask || ((mask[id >>> 5] as number) >>> (id & 31) & 1) !== 1) throw new Error(`constraint bench: ${vocab} ${name}: id ${id} of the valid reply is masked out`);
        maskLogits(logits, mask);
        constraint.accept(id);
        if (pass === 2) times.push(performance.now() - t);
        if (pass === 2) forced += (await constraint.takeForced(0)).length;
      }
      constraint.dispose();
    }
    rows.push({ vocab, vocabSize: tokenizer.vocabSize, schema: name, ids: ids.length, forced, medianMs: median(times), maxMs: Math.max(...times), compileMs });
  }
  return rows;
}

/** The demo model's decode step, the median of 24 greedy steps after a short prompt. */
async function demoStepMs(): Promise<number> {
  const { config } = loadConfig(join(demoDir, "config.json"));
  using engine = openEngine({
    modelDir: demoDir, config, layerCount: config.numLayers, positions: 64, prefillChunk: 64,
    budgets: budgetRequest([{ kind: "cache", bytes: gbToBytes(1) }]), trunkDir: undefined,
  });
  const steps: number[] = [];
  await decode(engine.model, [1, 2, 3, 4, 5, 6, 7, 8], { maxNewTokens: 25, mode: "incremental", afterStep: (r) => { if (r.step > 0) steps.push(r.seconds * 1000); } });
  return median(steps);
}

export interface ConstraintBench {
  rows: ConstraintRow[];
  demoStepMs: number;
  kimiSkipped: string | undefined;
}

export async function benchConstraint(): Promise<ConstraintBench> {
  const rows = await measure(loadTokenizer(demoDir), "demo");
  const kimiSkipped = KIMI_DIR === undefined ? "the released Kimi table is absent (K3_KIMI_TOKENIZER)" : undefined;
  if (KIMI_DIR !== undefined) rows.push(...(await measure(loadTokenizer(KIMI_DIR), "kimi")));
  return { rows, demoStepMs: await demoStepMs(), kimiSkipped };
}

export function constraintReport(b: ConstraintBench): PartReport {
  const figures = new Figures("constraint");
  const step = figures.add("demo_step", "the demo model's decode step (median of 24)", b.demoStepMs, "ms", "a limit: the mask rows are measured against it");
  const lines = [`constraint: mask + masked logits + advance per id, against the demo model's ${step.value.toFixed(2)} ms step`];
  for (const r of b.rows) {
    const f = figures.add(`${r.vocab}.${r.schema}`, `constraint, ${r.vocab} vocabulary (${r.vocabSize} ids), ${r.schema} schema: per id, median over a ${r.ids}-id reply`, r.medianMs, "ms",
      { what: "the demo model's decode step", value: b.demoStepMs, unit: "ms" });
    figures.add(`${r.vocab}.${r.schema}.max`, `the same, the slowest id`, r.maxMs, "ms", { what: "the demo model's decode step", value: b.demoStepMs, unit: "ms" });
    figures.add(`${r.vocab}.${r.schema}.compile`, `the same, compiling the schema (first use)`, r.compileMs, "ms", "a one-time cost per schema (cached after)");
    lines.push(`  ${r.vocab.padEnd(5)} ${r.schema.padEnd(7)} ${r.medianMs.toFixed(3)} ms/id median (${((f.ratio ?? 0) * 100).toFixed(1)}% of a demo step), slowest ${r.maxMs.toFixed(3)} ms, compile ${r.compileMs.toFixed(1)} ms`);
  }
  if (b.kimiSkipped) lines.push(`  kimi: skipped (${b.kimiSkipped})`);
  return { lines, figures: figures.list, failures: [] };
}

if (import.meta.main) {
  const report = constraintReport(await benchConstraint());
  for (const line of report.lines) console.log(line);
}
