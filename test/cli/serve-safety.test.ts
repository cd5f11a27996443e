/**
 * `k3 serve` safe by default (the list, through dist/k3 over HTTP): an empty key is a
 * usage error, a port another server holds is refused by name while that server keeps
 * answering, the Authorization scheme is matched without regard to case, and an unseeded
 * request draws a fresh seed that it reports and that reproduces its answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { demoDir } from "../support/demo.ts";
import { k3 } from "../support/k3.ts";
import { serve, stopAll, type Served } from "../support/serve.ts";

afterAll(stopAll, 30_000); // each server waits up to 2 s for idle keep-alive connections

describe("k3 serve refuses what would leave it open or shared", () => {
  test("an empty --api-key or K3_API_KEY exits 2 with one line", () => {
    const flag = k3(["serve", demoDir, "--tok", demoDir, "--api-key", "", "--port", "0"]);
    expect([flag.code, flag.stderr]).toEqual([2, "k3: --api-key is empty: give a key, or leave the flag out to serve without one\n"]);
    const env = k3(["serve", demoDir, "--tok", demoDir, "--port", "0"], { env: { K3_API_KEY: "" } });
    expect([env.code, env.stderr]).toEqual([2, "k3: K3_API_KEY is set but empty: give a key, or unset it to serve without one\n"]);
  });

  test("a second server on a port in use exits 1 naming the port, and the first keeps answering", async () => {
    const first = await serve(demoDir);
    const port = new URL(first.url).port;
    const second = k3(["serve", demoDir, "--tok", demoDir, "--port", port], { timeoutMs: 20_000 });
    expect(second.code).toBe(1);
    expect(second.stderr).toBe(`k3: serve: port ${port} on 127.0.0.1 is in use (another server listens there): stop it or pick another --port\n`);
    for (let i = 0; i < 4; i++) expect((await fetch(`${first.url}/health`)).status).toBe(200);
  });
});

describe("a server with a key", () => {
  let s: Served;
  beforeAll(async () => { s = await serve(demoDir, [], { env: { K3_API_KEY: "sekrit" } }); });
  const models = (authorization?: string) => fetch(`${s.url}/v1/models`, { headers: authorization === undefined ? {} : { authorization } });

  test("the scheme is case-insensitive; the key is not", async () => {
    for (const header of ["Bearer sekrit", "bearer sekrit", "BEARER   sekrit"]) expect([header, (await models(header)).status]).toEqual([header, 200]);
    for (const header of [undefined, "Bearer Sekrit", "Basic sekrit", "Bearer", "Bearersekrit", "Bearer sekrit extra"]) {
      expect([header, (await models(header)).status]).toEqual([header, 401]);
    }
  });
});

describe("seeds", () => {
  let s: Served;
  beforeAll(async () => { s = await serve(demoDir); });
  const ask = async (body: Record<string, unknown>) => {
    const r = await fetch(`${s.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 24, temperature: 1, ...body }) });
    expect(r.status).toBe(200);
    const json = await r.json() as { choices: { text: string }[]; k3: { seed: number } };
    return { text: json.choices[0]!.text, seed: json.k3.seed };
  };
  const chat = async (body: Record<string, unknown>) => {
    const r = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 24, temperature: 1.5, top_p: 1, ...body }) });
    expect(r.status).toBe(200);
    const json = await r.json() as { choices: { message: { content: string | null; reasoning_content: string | null } }[]; k3: { seed: number } };
    return { text: JSON.stringify(json.choices[0]!.message), seed: json.k3.seed };
  };

  test("without a seed each request draws a fresh one and reports it; sent back, it gives the same answer", async () => {
    for (const endpoint of [ask, chat]) {
      const [a, b] = [await endpoint({}), await endpoint({})];
      expect(a.seed).not.toBe(b.seed);
      expect(a.text).not.toBe(b.text);
      for (const seed of [a.seed, b.seed]) expect(Number.isSafeInteger(seed) && seed >= 0).toBe(true);
      expect(await endpoint({ seed: a.seed })).toEqual(a);
      expect(await endpoint({ seed: b.seed })).toEqual(b);
    }
  });

  test("with a seed, the same answer every time, and that seed reported", async () => {
    const one = await ask({ seed: 12345 });
    expect(one.seed).toBe(12345);
    expect(await ask({ seed: 12345 })).toEqual(one);
  });
});
