/**
 * The reply constraint (chat/reply-constraint.ts, reply-shape.ts) driven without a model: random logits, masked, choose
 * each id, and the reply the parser reads back must be what the request asked for, every time:
 * JSON that validates against the schema (ajv), calls to declared tools only with arguments that
 * validate against their parameters, the tool-choice rules. A constraint that let one wrong id
 * through would show here within a few walks.
 */
import { describe, expect, test } from "bun:test";
import Ajv from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { ReplyConstraint } from "../../../src/chat/reply-constraint.ts";
import { replyShape } from "../../../src/chat/reply-shape.ts";
import { ReplyParser } from "../../../src/chat/parse.ts";
import { MessageBuilder } from "../../../src/chat/reply-message.ts";
import { parseChatRequest } from "../../../src/chat/request.ts";
import { controlIds } from "../../../src/chat/specials.ts";
import { maskCount, maskHas, maskLogits } from "../../../src/decode/constraint.ts";
import { argmax } from "../../../src/decode/sampler.ts";
import { SplitMix64 } from "../../../src/decode/rng.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { demoDir } from "../../support/demo.ts";
import { constraintSchemas } from "../../support/constraint-schemas.ts";

const tok = loadTokenizer(demoDir);
const controls = controlIds(tok);
const ajv = new Ajv({ strict: false });
addFormats(ajv);

/** Ids whose text ends JSON values and sections: favoured so that random walks end. */
const closers = new Set<number>();
for (let id = 0; id < tok.rankCount; id++) {
  const text = new TextDecoder().decode(tok.tokenBytes(id));
  if (/^[",}\]]|^ ?(true|false|null)$/.test(text)) closers.add(id);
}

interface Walk {
  ids: number[];
  forced: number;
  ended: boolean;
}

/** One reply chosen by argmax of random logits under the constraint (biased towards ending). */
async function walk(constraint: ReplyConstraint, seed: number, maxIds = 700): Promise<Walk> {
  const rng = new SplitMix64(seed);
  const ids: number[] = [];
  let forced = 0;
  while (ids.length < maxIds) {
    const run = await constraint.takeForced(maxIds - ids.length);
    ids.push(...run);
    forced += run.length;
    const mask = await constraint.allowed();
    if (!mask) break;
    const logits = new Float32Array(tok.vocabSize);
    for (let i = 0; i < logits.length; i++) logits[i] = rng.nextUniform() + (closers.has(i) ? 0.6 : 0) + (i === controls.close ? 1.5 : 0);
    const { count, first } = maskCount(mask, tok.vocabSize);
    expect(count).toBeGreaterThan(0);
    const id = count === 1 ? first : argmax(maskLogits(logits, mask));
    expect(maskHas(mask, id)).toBe(true);
    constraint.accept(id);
    ids.push(id);
    if (id === controls.endOfMessage || id === controls.eos) return { ids, forced, ended: true };
  }
  return { ids, forced, ended: false };
}

function parse(ids: readonly number[], thinking: boolean) {
  const parser = new ReplyParser(tok, { thinking });
  const builder = new MessageBuilder(thinking);
  for (const id of ids) builder.add(parser.push(id));
  builder.add(parser.finish());
  return builder.message();
}

async function constraintFor(body: Record<string, unknown>) {
  const request = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], ...body });
  const shape = await replyShape(request, tok);
  if (!shape) throw new Error("no constraint");
  return { request, make: () => new ReplyConstraint(shape, tok, tok.vocabSize) };
}

describe("response_format json_schema", () => {
  for (const [name, schema] of Object.entries(constraintSchemas)) {
    test(`${name}: every walk that ends is JSON that validates`, async () => {
      const { make } = await constraintFor({ thinking: { type: "disabled" }, response_format: { type: "json_schema", json_schema: { name, schema } } });
      const validate = ajv.compile(schema);
      let ended = 0;
      for (let seed = 1; seed <= 6; seed++) {
        const w = await walk(make(), seed);
        if (!w.ended) continue;
        ended++;
        const message = parse(w.ids, false);
        const value = JSON.parse(message.content ?? "");
        if (!validate(value)) throw new Error(`${name} seed ${seed}: ${message.content} ${ajv.errorsText(validate.errors)}`);
        expect(message.tool_calls).toBeUndefined();
      }
      expect(ended).toBeGreaterThan(0);
    });
  }

  test("json_object: an object, and with thinking on the think section closes first", async () => {
    const { make } = await constraintFor({ response_format: { type: "json_object" } });
    let ended = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const w = await walk(make(), seed);
      if (!w.ended) continue;
      ended++;
      const message = parse(w.ids, true);
      const value = JSON.parse(message.content ?? "") as unknown;
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
      expect(typeof message.reasoning_content).toBe("string");
      expect(w.forced).toBeGreaterThanOrEqual(5); // think<|sep|><|open|>response<|sep|>, then the closing tags
    }
    expect(ended).toBeGreaterThan(0);
  });
});

const weather = {
  type: "function", function: {
    name: "get_weather", parameters: {
      type: "object", properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 7 }, unit: { enum: ["c", "f"] } },
      required: ["city"], additionalProperties: false,
    },
  },
};
const time = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string", maxLength: 12 } }, required: ["zone"] } } };
const ping = { type: "function", function: { name: "ping" } };

describe("tool calls", () => {
  const validators = new Map([weather, time, ping].map((t) => [t.function.name, ajv.compile((t.function as { parameters?: object }).parameters ?? {})]));

  async function calls(body: Record<string, unknown>, seeds = 8) {
    const { make } = await constraintFor({ thinking: { type: "disabled" }, tools: [weather, time, ping], ...body });
    const out: { name: string; args: unknown }[][] = [];
    for (let seed = 1; seed <= seeds; seed++) {
      const w = await walk(make(), seed);
      if (!w.ended) continue;
      const message = parse(w.ids, false);
      const list = (message.tool_calls ?? []).map((c) => ({ name: c.function.name, args: JSON.parse(c.function.arguments) as unknown }));
      for (const c of list) {
        const validate = validators.get(c.name);
        if (!validate) throw new Error(`undeclared tool ${c.name}`);
        if (!validate(c.args)) throw new Error(`${c.name} ${JSON.stringify(c.args)}: ${ajv.errorsText(validate.errors)}`);
      }
      out.push(list);
    }
    expect(out.length).toBeGreaterThan(0);
    return out;
  }

  test("required: at least one call, each to a declared tool with valid arguments", async () => {
    for (const list of await calls({ tool_choice: "required" })) expect(list.length).toBeGreaterThan(0);
  });

  test("a named function: exactly one call, to it", async () => {
    for (const list of await calls({ tool_choice: { type: "function", function: { name: "get_weather" } } })) {
      expect(list.map((c) => c.name)).toEqual(["get_weather"]);
    }
  });

  test("none: no tools section at all", async () => {
    for (const list of await calls({ tool_choice: "none" })) expect(list).toEqual([]);
  });

  test("auto: free to answer or call; a call is always a declared one", async () => {
    await calls({ tool_choice: "auto" }, 10);
  });

  test("a named function that was not declared is a 400 naming tool_choice.function.name", async () => {
    const request = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], tools: [weather], tool_choice: { type: "function", function: { name: "nope" } } });
    await expect(replyShape(request, tok)).rejects.toThrow(/"nope" is not a declared tool/);
  });
});

describe("what cannot be enforced is refused, naming the keyword", () => {
  const cases: [string, object, RegExp][] = [
    ["not", { type: "object", properties: { a: { not: { type: "string" } } } }, /properties\.a\.not.*"not" is not enforced/],
    ["if", { if: { type: "string" }, then: { maxLength: 2 } }, /schema\.if/],
    ["uniqueItems", { type: "array", uniqueItems: true }, /uniqueItems/],
    ["an unknown format", { type: "string", format: "credit-card" }, /"credit-card" is not a format/],
    ["a $ref that does not resolve", { $ref: "#/$defs/missing" }, /does not resolve/],
    ["a number range no integer lies in", { type: "object", properties: { p: { type: "number", minimum: 0.1, maximum: 0.9 } } }, /properties\.p\.minimum: no integer lies in this range/],
    ["multipleOf", { type: "integer", multipleOf: 3 }, /"multipleOf" is not enforced/],
    ["allOf", { allOf: [{ type: "object" }, { required: ["a"] }] }, /"allOf" is not enforced/],
    ["oneOf without a discriminator", { oneOf: [{ type: "integer" }, { type: "number" }] }, /schema\.oneOf: oneOf is enforced only/],
    ["minItems above maxItems", { type: "array", minItems: 3, maxItems: 1 }, /minItems: 3 is above maxItems 1/],
  ];
  for (const [what, schema, message] of cases) {
    test(what, async () => {
      const request = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
      await expect(replyShape(request, tok)).rejects.toThrow(message);
    });
  }

  test("in a tool's parameters what cannot be enforced is listed, not refused; the rest still holds", async () => {
    const parameters = {
      type: "object",
      properties: {
        s: { type: "string", allOf: [{ pattern: "^a+$" }, { pattern: "^.{0,3}$" }] },
        p: { type: "string", pattern: "^[0-9]+$" },
        n: { type: "number", minimum: 0.1, maximum: 0.9 },
        e: { enum: ["x", "y"] },
      },
      required: ["s", "e"],
    };
    const request = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], thinking: { type: "disabled" }, tools: [{ type: "function", function: { name: "f", parameters } }], tool_choice: "required" });
    const shape = (await replyShape(request, tok))!;
    const at = "tools[0].function.parameters.properties";
    expect([...shape.unenforced].sort()).toEqual([`${at}.n.minimum`, `${at}.p.pattern`, `${at}.s.allOf`].sort());
    for (let seed = 1; seed <= 4; seed++) {
      const w = await walk(new ReplyConstraint(shape, tok, tok.vocabSize), seed);
      if (!w.ended) continue;
      const args = JSON.parse(parse(w.ids, false).tool_calls![0]!.function.arguments) as Record<string, unknown>;
      expect(["x", "y"]).toContain(args.e as string);
      expect(typeof args.s).toBe("string");
    }
  });
});

test("without response_format or tools nothing is constrained", async () => {
  expect(await replyShape(parseChatRequest({ messages: [{ role: "user", content: "Hi" }] }), tok)).toBeUndefined();
});

describe("the mask against a brute-force mask", () => {
  /** Every reply a finite schema allows, as JSON text; each id is allowed exactly when the text so far plus its bytes starts one of them. */
  const finite: [string, object, string[]][] = [
    ["an enum", { type: "object", properties: { colour: { enum: ["red", "green", "blue"] } }, required: ["colour"], additionalProperties: false },
      ['{"colour": "red"}', '{"colour": "green"}', '{"colour": "blue"}']],
    ["booleans and null", { type: "object", properties: { a: { type: "boolean" }, b: { type: "null" } }, required: ["a", "b"], additionalProperties: false },
      ['{"a": true, "b": null}', '{"a": false, "b": null}']],
    ["a const array", { type: "array", items: { const: 7 }, minItems: 1, maxItems: 2 }, ["[7]", "[7, 7]"]],
  ];
  const bytesOf = (id: number) => Buffer.from(tok.tokenBytes(id)).toString("latin1");
  for (const [what, schema, docs] of finite) {
    test(`${what}: at every step of several walks the mask is exactly the brute-force set`, async () => {
      const { make } = await constraintFor({ thinking: { type: "disabled" }, response_format: { type: "json_schema", json_schema: { name: "f", schema } } });
      const texts = docs.map((d) => Buffer.from(d, "utf8").toString("latin1"));
      for (let seed = 1; seed <= 4; seed++) {
        const constraint = make();
        const rng = new SplitMix64(seed);
        let text = "";
        for (let step = 0; step < 40; step++) {
          const mask = (await constraint.allowed()) as Int32Array;
          const expected: number[] = [];
          for (let id = 0; id < tok.rankCount; id++) if (texts.some((t) => t.startsWith(text + bytesOf(id)))) expected.push(id);
          if (texts.includes(text)) expected.push(controls.close);
          const actual: number[] = [];
          for (let id = 0; id < tok.vocabSize; id++) if (maskHas(mask, id)) actual.push(id);
          expect(actual).toEqual(expected);
          const id = expected[Math.floor(rng.nextUniform() * expected.length)] as number;
          constraint.accept(id);
          if (id === controls.close) break;
          text += bytesOf(id);
        }
        expect(texts).toContain(text);
      }
    });
  }
});
