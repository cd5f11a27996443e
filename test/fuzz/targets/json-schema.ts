/**
 * A JSON schema a client sends for a constrained reply (src/chat/schema-keywords.ts):
 * every keyword k3 enforces, in the shapes clients write, mutated; the check must accept or
 * refuse with one line naming the field. In process only (over HTTP it is one more request field).
 */
import { checkSchema } from "../../../src/chat/schema-keywords.ts";
import { plain } from "../../../src/chat/reply-shape.ts";
import { parseJsonValue } from "../../../src/json.ts";
import { text, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";
import { K3Error } from "../../../src/errors.ts";

const schema = JSON.stringify({
  $defs: { point: { type: "object", properties: { x: { type: "integer", minimum: 0, maximum: 9 } }, required: ["x"] } },
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 20, description: "a name" },
    tags: { type: "array", items: { enum: ["a", "b"] }, minItems: 1, maxItems: 3 },
    at: { $ref: "#/$defs/point" },
    when: { type: "string", format: "date" },
    code: { type: "string", pattern: "^[A-Z]{3}$" },
    either: { anyOf: [{ type: "null" }, { const: 3 }] },
    shape: { oneOf: [
      { type: "object", properties: { kind: { const: "c" } }, required: ["kind"] },
      { type: "object", properties: { kind: { const: "s" } }, required: ["kind"] },
    ] },
  },
  required: ["name"],
  additionalProperties: false,
}, null, 1);

export const jsonSchemaTarget: FuzzTarget = {
  name: "json-schema",
  about: "response_format / tool parameter schemas: checkSchema (keywords, shapes, $ref, bounds, oneOf discriminators)",
  seeds: () => [{ label: "schema.json", bytes: utf8(schema) }] as Seed[],
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input) => {
    let value;
    try {
      value = parseJsonValue(text(input));
    } catch (error) {
      throw new K3Error(2, `schema: not JSON (${(error as Error).message.split("\n")[0]})`);
    }
    const schemaValue = plain(value);
    checkSchema(schemaValue, "response_format.json_schema.schema");
    return JSON.stringify(schemaValue);
  },
};
