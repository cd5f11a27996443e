/**
 * The worked examples of chat.md 2.11 (A-G) as requests and the ids the released Kimi table
 * gives for them, shared by the renderer's unit test and the `k3 render` CLI test.
 */

const ids = (text: string): number[] => text.split(",").map((s) => Number(s.trim()));

export const EFF_MAX = ids(`163587,2778,6244,878,14062,1,1798,878,130400,59991,470,1,163589,63,130400,123074,470,63,28560,418,
1632,2455,308,2704,306,651,9545,8491,347,2976,3411,276,4503,8491,904,9141,4661,3867,1268,1332,5713,
1268,50004,5713,1268,19421,5713,316,1268,5354,16518,10048,276,2403,387,42070,472,1268,130400,123074,
470,105281,11369,163588,2778,163589,163586`);
const withEffort = (replacement: number[]): number[] => {
  const at = EFF_MAX.indexOf(105281);
  return [...EFF_MAX.slice(0, at), ...replacement, ...EFF_MAX.slice(at + 1)];
};
export const EFF_HIGH = withEffort([28, 19421]);
export const EFF_LOW = withEffort([28, 1332]);
export const GEN_THINK = ids("163587,2778,6244,878,69702,1,163589,163587,39964,163589");
export const GEN_RESP = ids("163587,2778,6244,878,69702,1,163589,163587,12092,163589");

const USER_HELLO = ids("163587,2778,6244,878,2482,1,163589,19180,163588,2778,163589,163586");
const SYSTEM_HELPFUL = ids("163587,2778,6244,878,14062,1,163589,3900,554,13205,13,163588,2778,163589,163586");

const C_U1 = ids("163587,2778,6244,878,2482,1,163589,38587,30,163588,2778,163589,163586");
const C_A1 = ids(`163587,2778,6244,878,69702,1,163589,163587,39964,163589,65447,8056,220,22136,316,220,18395,13,
    163588,39964,163589,163587,12092,163589,42780,11,220,49114,11,220,23782,163588,12092,163589,
    163588,2778,163589,163586`);
const C_U2 = ids("163587,2778,6244,878,2482,1,163589,5376,1646,276,1356,2069,30,163588,2778,163589,163586");
const C_A1_OFF = ids(`163587,2778,6244,878,69702,1,163589,163587,12092,163589,42780,11,220,49114,11,220,23782,
     163588,12092,163589,163588,2778,163589,163586`);

const D_DECL = ids(`163587,2778,6244,878,14062,1,1798,878,20960,120083,677,1,163589,2,30391,198,12214,554,276,2878,
      7697,11,11880,306,11419,11438,1481,3251,5534,198,81103,3879,22849,11031,7471,1959,276,10666,318,
      261,5243,13,3923,1152,7471,618,21055,2800,3923,24453,22849,27129,22849,37666,22849,2217,7471,2033,
      60027,21030,22849,2217,7471,28641,60336,2020,20331,46890,37666,131917,2217,7471,3721,60336,2020,
      2217,7471,3879,16934,1641,3251,163588,2778,163589,163586`);
const D_USER = ids("163587,2778,6244,878,2482,1,163589,65512,306,17374,30,163588,2778,163589,163586");
export const D_ASSISTANT = ids(`163587,2778,6244,878,69702,1,163589,163587,39964,163589,20082,276,4453,13,163588,39964,163589,
      163587,12092,163589,163588,12092,163589,163587,25385,163589,163587,10257,4453,878,618,21055,2800,
      1,4002,878,16,1,163589,163587,47185,2355,878,37666,1,1798,878,2033,1,163589,113476,163588,47185,
      163589,163587,47185,2355,878,21030,1,1798,878,10006,1,163589,17,163588,47185,163589,163588,10257,
      163589,163588,25385,163589,163588,2778,163589,163586`);
const D_TOOL = ids(`163587,2778,6244,878,20960,1,4453,878,618,21055,2800,1,4002,878,16,1,163589,1428,34,11,12981,
      163588,2778,163589,163586`);

const E1_ASSISTANT = ids(`163587,2778,6244,878,69702,1,163589,163587,39964,163589,163588,39964,163589,163587,12092,
             163589,33845,163588,12092,163589,163588,2778,163589,163586`);
const E2_USER = ids(`163587,2778,6244,878,2482,1,163589,2066,557,11419,220,23595,9481,2648,3372,118973,26476,2678,864,
        10726,1777,12468,4160,10484,292,163588,2778,163589,163586`);
const E3_FORMAT = ids(`163587,2778,6244,878,14062,1,1798,878,12092,46906,1,163589,1008,2403,387,42070,472,
        1268,12092,15764,129392,36512,16518,12080,4503,2746,413,10872,11419,1544,2932,66661,3253,13825,347,
        3251,5534,8,528,1178,6031,44768,341,1008,11419,1544,2746,4620,276,4111,14453,777,3251,5534,198,8264,
        58549,8727,1289,8092,2020,27129,22849,144829,22849,2217,7471,16849,60336,2020,20331,46890,144829,
        131917,2217,7471,3721,35823,3251,163588,2778,163589,163586`);

const EFFORT_TEXT = (effort: string): string =>
  '<|open|>message role="system" type="thinking-effort"<|sep|>`thinking_effort` guides on how much to think in your thinking channel ' +
  "(not including the response channel), supported values include `low`, `medium`, `high`, and `max`.\n" +
  `Now the system is invoked with \`thinking_effort=${effort}\`.<|close|>message<|sep|><|end_of_msg|>`;

export interface Vector {
  readonly name: string;
  readonly request: unknown;
  readonly ids: readonly number[];
  /** Moonshot's `usage.prompt_tokens` where chat.md gives it (ids minus the channel opener). */
  readonly promptTokens: number;
  /** The rendered text, where chat.md gives it in full. */
  readonly text?: string;
}

const hello = [{ role: "user", content: "Hello" }];
const systemHello = [{ role: "system", content: "You are helpful." }, ...hello];
const twoTurns = [
  { role: "user", content: "Numbers?" },
  { role: "assistant", content: "473, 921, 235", reasoning_content: "I'll remember 215 and 222." },
  { role: "user", content: "What were the other two?" },
];
const capital = [{ role: "user", content: "请用 JSON 格式回答：北京是中国的首都吗？答案需要包含键 capital。" }];

export const D_REQUEST = {
  tools: [{
    type: "function",
    function: {
      name: "get_weather", description: "Get the weather of a city.",
      parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] },
    },
  }],
  reasoning_effort: "high",
  messages: [
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant", content: "", reasoning_content: "Need the tool.",
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris", "days": 2}' } }],
    },
    { role: "tool", tool_call_id: "call_1", content: "18C, rain" },
  ],
};

const vector = (name: string, request: unknown, parts: number[][], text?: string): Vector => {
  const all = parts.flat();
  return { name, request, ids: all, promptTokens: all.length - 3, ...(text === undefined ? {} : { text }) };
};

export const VECTORS: readonly Vector[] = [
  vector("A one user turn, defaults", { messages: hello }, [EFF_MAX, USER_HELLO, GEN_THINK],
    `${EFFORT_TEXT("max")}<|open|>message role="user"<|sep|>Hello<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>`),
  vector("B system + user, thinking on", { messages: systemHello }, [EFF_MAX, SYSTEM_HELPFUL, USER_HELLO, GEN_THINK]),
  vector("B system + user, thinking off", { messages: systemHello, thinking: { type: "disabled" } }, [SYSTEM_HELPFUL, USER_HELLO, GEN_RESP],
    '<|open|>message role="system"<|sep|>You are helpful.<|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>Hello<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>response<|sep|>'),
  vector("B system + user, effort low", { messages: systemHello, reasoning_effort: "low" }, [EFF_LOW, SYSTEM_HELPFUL, USER_HELLO, GEN_THINK]),
  vector("C two turns, preserved reasoning, thinking on", { messages: twoTurns }, [EFF_MAX, C_U1, C_A1, C_U2, GEN_THINK],
    `${EFFORT_TEXT("max")}<|open|>message role="user"<|sep|>Numbers?<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>I'll remember 215 and 222.<|close|>think<|sep|><|open|>response<|sep|>473, 921, 235<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|><|open|>message role="user"<|sep|>What were the other two?<|close|>message<|sep|><|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>`),
  vector("C two turns, thinking off", { messages: twoTurns, chat_template_kwargs: { thinking: false } }, [C_U1, C_A1_OFF, C_U2, GEN_RESP]),
  vector("D tools: declaration, call, result", D_REQUEST, [D_DECL, EFF_HIGH, D_USER, D_ASSISTANT, D_TOOL, GEN_THINK],
    '<|open|>message role="system" type="tool-declare"<|sep|># Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n' +
    '[{"function":{"description":"Get the weather of a city.","name":"get_weather","parameters":{"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"type":"object"}},"type":"function"}]\n' +
    "```<|close|>message<|sep|><|end_of_msg|>" + EFFORT_TEXT("high") +
    '<|open|>message role="user"<|sep|>Weather in Paris?<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>Need the tool.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key="days" type="number"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="tool" tool="get_weather" index="1"<|sep|>18C, rain<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'),
  vector("E1 assistant_hello (KVV 99)", { messages: [{ role: "assistant", content: "你好" }], reasoning_effort: "high" }, [EFF_HIGH, E1_ASSISTANT, GEN_THINK]),
  vector("E2 Han user turn, thinking off (KVV 36)", { messages: capital, thinking: { type: "disabled" } }, [E2_USER, GEN_RESP]),
  vector("E3 E2 + json_schema (KVV 119)", {
    messages: capital, thinking: { type: "disabled" },
    response_format: {
      type: "json_schema",
      json_schema: { name: "capital_answer", schema: { type: "object", properties: { capital: { type: "boolean" } }, required: ["capital"], additionalProperties: false } },
    },
  }, [E2_USER, E3_FORMAT, GEN_RESP]),
];

/** Vector G: the opening tag of a call to `name`, four-segment attributes (chat.md 2.11 G). */
export const G_PRIVATE_CALL = ids("163587,10257,4453,878,29552,1,4002,878,16,1,163589");
/** ...and the same header when a joined ` key="value"` segment is (wrongly) used. */
export const G_PRIVATE_JOINED = ids("163587,10257,4453,14151,12443,1,4002,878,16,1,163589");

/** A request whose history has one call to `name` with no arguments. */
export function callRequest(name: string): unknown {
  return {
    messages: [
      { role: "user", content: "x" },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name, arguments: "{}" } }] },
    ],
  };
}

/** Where `needle` occurs in `haystack`, or -1. */
export function indexOfRun(haystack: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let k = 0; k < needle.length; k++) if (haystack[i + k] !== needle[k]) continue outer;
    return i;
  }
  return -1;
}
