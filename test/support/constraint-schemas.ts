/**
 * JSON schemas constrained replies are tested on (in process and over HTTP): objects, enums,
 * arrays with bounds, nesting, anyOf, $ref, strings and numbers with bounds, formats, patterns.
 */
export const constraintSchemas: Record<string, object> = {
  person: { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"], additionalProperties: false },
  optional: { type: "object", properties: { a: { type: "string" }, b: { type: "boolean" } }, required: ["a"] },
  enum_colour: { type: "object", properties: { colour: { enum: ["red", "green", "blue"] } }, required: ["colour"] },
  const_kind: { type: "object", properties: { kind: { const: "point" }, x: { type: "number" } }, required: ["kind", "x"] },
  bounded_array: { type: "object", properties: { tags: { type: "array", items: { type: "string", maxLength: 8 }, minItems: 1, maxItems: 3 } }, required: ["tags"] },
  integers: { type: "array", items: { type: "integer", minimum: 0, maximum: 20 }, minItems: 2, maxItems: 4 },
  nested: {
    type: "object",
    properties: { owner: { type: "object", properties: { name: { type: "string" }, pets: { type: "array", items: { type: "string" }, maxItems: 2 } }, required: ["name", "pets"] } },
    required: ["owner"],
  },
  any_of: { type: "object", properties: { value: { anyOf: [{ type: "integer" }, { type: "string", maxLength: 5 }, { type: "null" }] } }, required: ["value"] },
  one_of: {
    oneOf: [
      { type: "object", properties: { shape: { const: "circle" }, r: { type: "number" } }, required: ["shape", "r"], additionalProperties: false },
      { type: "object", properties: { shape: { const: "square" }, side: { type: "number" } }, required: ["shape", "side"], additionalProperties: false },
    ],
  },
  refs: {
    $defs: { point: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" } }, required: ["x", "y"] } },
    type: "object", properties: { from: { $ref: "#/$defs/point" }, to: { $ref: "#/$defs/point" } }, required: ["from", "to"],
  },
  definitions: { definitions: { id: { type: "string", minLength: 2, maxLength: 4 } }, type: "object", properties: { id: { $ref: "#/definitions/id" } }, required: ["id"] },
  recursive: {
    $defs: { node: { type: "object", properties: { v: { type: "integer" }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } }, required: ["v", "next"] } },
    $ref: "#/$defs/node",
  },
  string_bounds: { type: "object", properties: { code: { type: "string", minLength: 3, maxLength: 3 } }, required: ["code"] },
  integer_range: { type: "object", properties: { score: { type: "integer", minimum: 1, maximum: 5 }, n: { type: "integer", exclusiveMinimum: 0, exclusiveMaximum: 10 } }, required: ["score", "n"] },
  numbers: { type: "object", properties: { p: { type: "number" }, q: { type: ["number", "null"] }, r: { type: "number", minimum: 0.5, exclusiveMaximum: 10 } }, required: ["p", "q", "r"] },
  pattern: { type: "object", properties: { zip: { type: "string", pattern: "^[0-9]{5}$" } }, required: ["zip"] },
  date: { type: "object", properties: { day: { type: "string", format: "date" } }, required: ["day"] },
  uuid: { type: "object", properties: { id: { type: "string", format: "uuid" } }, required: ["id"] },
  booleans: { type: "object", properties: { yes: { type: "boolean" }, none: { type: "null" } }, required: ["yes", "none"] },
  type_list: { type: "object", properties: { v: { type: ["string", "integer"] } }, required: ["v"] },
  prefix_items: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], items: false },
  min_properties: { type: "object", additionalProperties: { type: "integer" }, minProperties: 1, maxProperties: 2 },
  described: { title: "Answer", description: "an answer", type: "object", properties: { answer: { type: "string", description: "the answer" } }, required: ["answer"] },
};
