/** The Host and Origin rules of k3 serve (src/serve/request-origin.ts), value by value. */
import { describe, expect, test } from "bun:test";
import { hostAllowed, hostName, originAllowed, originPolicy } from "../../../src/serve/request-origin.ts";

const policy = originPolicy("0.0.0.0", 8000, ["K3.Internal"], ["http://localhost:3000/", "https://app.example"]);

describe("Host", () => {
  test("a name, with or without a port, IPv6 in brackets; case does not matter", () => {
    expect(["localhost:8000", "LOCALHOST", "127.0.0.1", "[::1]:8000", "0.0.0.0:8000", "k3.internal:1"].map((h) => hostAllowed(h, policy))).toEqual(Array(6).fill(true));
  });
  test("another name, a look-alike, a malformed value or none is refused", () => {
    for (const h of [null, "", "attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io", "::1", "[::1", "localhost:8000:1", "local host", "localhost:123456", "user@localhost"]) {
      expect([h, hostAllowed(h, policy)]).toEqual([h, false]);
    }
    expect(hostName("[::1]:80")).toBe("::1");
  });
});

describe("Origin", () => {
  test("none (not a browser page), the server's own page at its port, an allowed origin", () => {
    for (const o of [null, "http://localhost:8000", "http://127.0.0.1:8000", "http://[::1]:8000", "http://localhost:3000", "HTTPS://APP.EXAMPLE"]) expect([o, originAllowed(o, policy)]).toEqual([o, true]);
  });
  test("another site, another port or scheme, a path, null: refused", () => {
    for (const o of ["https://evil.example", "http://localhost:8001", "https://localhost:8000", "http://localhost:8000/x", "null", "", "http://localhost", "http://app.example"]) {
      expect([o, originAllowed(o, policy)]).toEqual([o, false]);
    }
    expect(originAllowed("https://evil.example", originPolicy("127.0.0.1", 8000, [], ["*"]))).toBe(true);
  });
});
