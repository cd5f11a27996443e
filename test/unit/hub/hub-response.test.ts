/**
 * The Hub response parsers (src/hub/hub-response.ts) and the download record parser on real
 * shapes and on hostile input: every input either gives a checked value or a HubResponseError /
 * K3Error naming what was wrong, never another exception, a path that escapes, or a silent
 * default.
 */
import { describe, expect, test } from "bun:test";
import { K3Error } from "../../../src/errors.ts";
import { checkRepoId, checkRevision, mayCarryToken, parseHubEndpoint, resolveUrl } from "../../../src/hub/hub-endpoint.ts";
import { backoffMs, defaultRetryPolicy } from "../../../src/hub/hub-http.ts";
import {
  HubResponseError, hubResponseParsers, joinTreePages, parseContentLength, parseContentRange, parseNextLink,
  parseRetryAfterSeconds, parseRevisionInfo, parseTreePage, unsafePathReason,
} from "../../../src/hub/hub-response.ts";
import { parseDownloadRecord } from "../../../src/fetch/download-record.ts";
import { pseudoRandomBytes } from "../../support/fake-hub.ts";

const sha = "0123456789abcdef0123456789abcdef01234567";
const sha256 = "d88b0d6a6ff9c3f8151f9d3228f57092aaea997f09af009eefd7373a77b5abb9";
const entry = (over: Record<string, unknown> = {}) => ({ type: "file", path: "config.json", size: 554, oid: sha, ...over });

function refused(f: () => unknown, message: string | RegExp): void {
  let error: unknown;
  try {
    f();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(HubResponseError);
  if (typeof message === "string") expect((error as Error).message).toContain(message);
  else expect((error as Error).message).toMatch(message);
}

describe("revision info", () => {
  test("the commit sha of the Hub's answer (extra fields ignored)", () => {
    expect(parseRevisionInfo({ id: "moonshotai/Kimi-K3", sha, siblings: [], lastModified: "x" }, "r")).toEqual({ sha });
  });
  test("a missing, short, uppercase or non-string sha is refused", () => {
    for (const body of [{}, { sha: sha.slice(1) }, { sha: sha.toUpperCase() }, { sha: 12 }, { sha: `${sha}\n` }, [], null, "x"]) {
      refused(() => parseRevisionInfo(body, "rev main"), "rev main:");
    }
  });
});

describe("tree listing", () => {
  test("files with git oids and LFS sha256s; directories dropped", () => {
    const files = parseTreePage([
      { type: "directory", path: "weights", oid: sha },
      entry(),
      entry({ path: "weights/model.safetensors", size: 548123560, lfs: { oid: sha256, size: 548123560, pointerSize: 134 }, xetHash: "ab" }),
    ], "t");
    expect(files).toEqual([
      { path: "config.json", size: 554, gitOid: sha, lfsSha256: undefined },
      { path: "weights/model.safetensors", size: 548123560, gitOid: sha, lfsSha256: sha256 },
    ]);
  });

  test("hostile paths are refused with the reason", () => {
    const cases: [string, string][] = [
      ["../etc/passwd", "'..' segment"], ["a/../../b", "'..' segment"], ["/etc/passwd", "absolute"], ["a//b", "empty"],
      ["./a", "'.' or '..' segment"], ["a/", "empty"], ["", "empty"], ["C:evil", "drive letter"], ["a\\..\\b", "backslash"],
      ["a\u0000b", "control character"], ["a\nb", "control character"], ["\ud800x", "well-formed"], ["x".repeat(2000), "longer than"],
    ];
    for (const [path, reason] of cases) {
      expect(unsafePathReason(path)).toContain(reason);
      refused(() => parseTreePage([entry({ path })], "t"), reason);
    }
    expect(unsafePathReason("model-00001-of-000096.safetensors")).toBeUndefined();
    expect(unsafePathReason("tokenizer/tiktoken.model")).toBeUndefined();
    expect(unsafePathReason("..hidden")).toBeUndefined();
  });

  test("sizes, oids and LFS records that are not what they claim are refused", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ size: -1 }, "not a byte count"], [{ size: 1.5 }, "not a byte count"], [{ size: "554" }, "not a byte count"],
      [{ size: 2e15 }, "not a byte count"], [{ size: Number.NaN }, "not a byte count"], [{ size: undefined }, "not a byte count"],
      [{ oid: "xyz" }, "git oid"], [{ oid: undefined }, "git oid"],
      [{ lfs: { oid: sha256, size: 553 } }, "differs from the file size"], [{ lfs: { oid: sha, size: 554 } }, "LFS sha256"],
      [{ lfs: "yes" }, "not an object"], [{ lfs: { size: 554 } }, "LFS sha256"],
      [{ type: "submodule" }, "unknown entry type"], [{ type: undefined }, "unknown entry type"], [{ path: 7 }, "no path"],
    ];
    for (const [over, message] of bad) refused(() => parseTreePage([entry(over)], "t"), message);
    refused(() => parseTreePage({ files: [] }, "t"), "not a JSON array");
    refused(() => parseTreePage([null], "t"), "entry 0 is not an object");
    refused(() => parseTreePage(new Array(100_001).fill(0), "t"), "more than 100000 entries");
  });

  test("joined pages refuse duplicates, temporary-name collisions, reserved names and file/directory clashes", () => {
    const f = (path: string) => ({ path, size: 1, gitOid: sha, lfsSha256: undefined });
    expect(joinTreePages([[f("b")], [f("a/c")]], [], "t").map((x) => x.path)).toEqual(["a/c", "b"]);
    refused(() => joinTreePages([[f("a")], [f("a")]], [], "t"), "listed twice");
    refused(() => joinTreePages([[f("a"), f("a.part")]], [], "t"), "collides with the temporary name");
    refused(() => joinTreePages([[f(".k3-download.json")]], [".k3-download.json"], "t"), "a name k3 keeps for itself");
    refused(() => joinTreePages([[f("a"), f("a/b")]], [], "t"), "needs \"a\" to be a directory");
  });
});

describe("headers", () => {
  test("Link: the rel=next target, resolved; other rels ignored", () => {
    const base = "https://huggingface.co/api/models/a/b/tree/main?recursive=true";
    expect(parseNextLink('<https://huggingface.co/api/models/a/b/tree/main?cursor=x>; rel="next"', base, "l")).toBe("https://huggingface.co/api/models/a/b/tree/main?cursor=x");
    expect(parseNextLink('</api/x?c=2>; rel=next, <https://h/prev>; rel="prev"', base, "l")).toBe("https://huggingface.co/api/x?c=2");
    expect(parseNextLink('<https://h/last>; rel="last"', base, "l")).toBeUndefined();
    expect(parseNextLink(null, base, "l")).toBeUndefined();
    refused(() => parseNextLink("garbage", base, "l"), "malformed");
    refused(() => parseNextLink('<http://[bad>; rel="next"', base, "l"), "not a URL");
  });

  test("Content-Range and Content-Length are byte counts or refused", () => {
    expect(parseContentRange("bytes 100-199/1000", "c")).toEqual({ start: 100, end: 199, total: 1000 });
    expect(parseContentRange("bytes 0-0/*", "c")).toEqual({ start: 0, end: 0, total: undefined });
    expect(parseContentRange(null, "c")).toBeUndefined();
    for (const h of ["bytes 200-100/1000", "bytes 0-1000/1000", "bytes */1000", "items 0-1/2", "bytes -1-5/9", "bytes 1-2/99999999999999999"]) {
      refused(() => parseContentRange(h, "c"), "Content-Range");
    }
    expect(parseContentLength("1234", "c")).toBe(1234);
    expect(parseContentLength(null, "c")).toBeUndefined();
    for (const h of ["-1", "1e3", "0x10", "", "12 34"]) refused(() => parseContentLength(h, "c"), "Content-Length");
    expect(parseRetryAfterSeconds("5", 60)).toBe(5);
    expect(parseRetryAfterSeconds("100000", 60)).toBe(60);
    expect(parseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT", 60)).toBeUndefined();
  });
});

describe("endpoint, repository and revision", () => {
  test("K3_HUB_URL: http(s) only, no credentials, no query; the token only to the Hub's own origin", () => {
    const e = parseHubEndpoint("https://mirror.example/hf/");
    expect(e).toEqual({ base: "https://mirror.example/hf", origin: "https://mirror.example" });
    expect(resolveUrl(e, "a/b", sha, "dir/a b#?.bin")).toBe(`https://mirror.example/hf/a/b/resolve/${sha}/dir/a%20b%23%3F.bin`);
    for (const [raw, message] of [["ftp://x", "only http and https"], ["https://u:p@x", "credentials"], ["https://x/?a=1", "query"], ["nope", "not a URL"]]) {
      expect(() => parseHubEndpoint(raw)).toThrow(message as string);
    }
    expect(mayCarryToken(new URL("https://mirror.example/hf/a"), e)).toBe(true);
    expect(mayCarryToken(new URL("https://cdn.example/a"), e)).toBe(false);
    const plain = parseHubEndpoint("http://mirror.example");
    expect(mayCarryToken(new URL("http://mirror.example/a"), plain)).toBe(false);
    const local = parseHubEndpoint("http://127.0.0.1:8080");
    expect(mayCarryToken(new URL("http://127.0.0.1:8080/a"), local)).toBe(true);
    expect(mayCarryToken(new URL("http://127.0.0.1:8081/a"), local)).toBe(false);
  });

  test("--repo and --revision refuse what cannot be a repository or a revision", () => {
    expect(checkRepoId("moonshotai/Kimi-K3")).toBe("moonshotai/Kimi-K3");
    for (const repo of ["Kimi-K3", "a/b/c", "../x", "a/..", "a/b c", "a/.b", ""]) expect(() => checkRepoId(repo)).toThrow("--repo");
    expect(checkRevision("main")).toBe("main");
    expect(checkRevision("refs/pr/1")).toBe("refs/pr/1");
    for (const rev of ["", "a b", "a..b", "x\n", "a:b"]) expect(() => checkRevision(rev)).toThrow("--revision");
  });

  test("backoff doubles to its cap, and Retry-After wins", () => {
    expect([1, 2, 3, 10].map((n) => backoffMs(defaultRetryPolicy, n, undefined))).toEqual([500, 1000, 2000, 20_000]);
    expect(backoffMs(defaultRetryPolicy, 1, 7)).toBe(7000);
  });
});

describe("the download record", () => {
  const good = {
    format: "k3-download", version: 1, repo: "a/b", revision: "main", commit: sha, endpoint: "https://huggingface.co",
    include: [], exclude: ["*.txt"], excluded: [{ path: "x.txt", size: 3 }], updated_at: "2026-01-01T00:00:00Z",
    files: [{ path: "config.json", size: 554, git_oid: sha, lfs_sha256: null, sha256: sha256, verified_at: "t" }],
  };
  test("a valid record round-trips", () => {
    expect(parseDownloadRecord(JSON.stringify(good), "r").files[0]!.sha256).toBe(sha256);
  });
  test("anything else is refused naming the field, with what to do", () => {
    const variants: [unknown, string][] = [
      [{ ...good, format: "x" }, "format"], [{ ...good, version: 2 }, "version"], [{ ...good, commit: "main" }, "commit"],
      [{ ...good, files: [{ ...good.files[0], path: "../x" }] }, "files[0].path is refused"],
      [{ ...good, files: [{ ...good.files[0], size: -3 }] }, "files[0].size"], [{ ...good, files: [{ ...good.files[0], sha256: "zz" }] }, "files[0].sha256"],
      [{ ...good, files: [good.files[0], good.files[0]] }, "listed twice"], [{ ...good, excluded: [{ path: "/abs", size: 1 }] }, "excluded[0].path"],
      [{ ...good, include: [1] }, "include and exclude"], [[], "not a JSON object"],
    ];
    for (const [value, message] of variants) {
      expect(() => parseDownloadRecord(JSON.stringify(value), "/d/.k3-download.json")).toThrow(message);
    }
    expect(() => parseDownloadRecord("{", "/d/.k3-download.json")).toThrow(/not valid JSON \(1:1: .*\) \(delete it to start the download over\)/);
  });
});

describe("fuzzing by random and mutated inputs", () => {
  /** Random strings, and real answers with bytes flipped, dropped and duplicated. */
  function inputs(seed: number, count: number): string[] {
    const real = [
      JSON.stringify({ sha, siblings: [] }),
      JSON.stringify([entry(), entry({ path: "w/m.safetensors", size: 9, lfs: { oid: sha256, size: 9, pointerSize: 134 } })]),
      '<https://huggingface.co/api/models/a/b/tree/main?cursor=x>; rel="next"', "bytes 100-199/1000", "1234", "5",
    ];
    const noise = pseudoRandomBytes(count * 64, seed);
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      const base = real[i % real.length] as string;
      const chars = [...base];
      const r = noise[i * 64] as number;
      for (let k = 0; k < 1 + (r % 4); k++) {
        const at = (noise[i * 64 + 1 + k] as number) % Math.max(chars.length, 1);
        const op = (noise[i * 64 + 10 + k] as number) % 3;
        const c = String.fromCharCode(noise[i * 64 + 20 + k] as number);
        if (op === 0) chars[at] = c;
        else if (op === 1) chars.splice(at, 1);
        else chars.splice(at, 0, c, c);
      }
      out.push(chars.join(""));
      out.push(new TextDecoder().decode(noise.subarray(i * 64, i * 64 + (r % 64))));
    }
    return out;
  }

  test("every parser gives a value or its own error, for 4,000 hostile inputs each", () => {
    for (const [name, parse] of Object.entries(hubResponseParsers)) {
      for (const input of inputs(name.length * 7919, 2000)) {
        try {
          parse(input);
        } catch (error) {
          if (!(error instanceof HubResponseError)) throw new Error(`${name}(${JSON.stringify(input)}) threw ${error}`);
        }
      }
    }
    for (const input of inputs(31, 500)) {
      try {
        parseDownloadRecord(input, "r");
      } catch (error) {
        expect(error).toBeInstanceOf(K3Error);
      }
    }
  });
});
