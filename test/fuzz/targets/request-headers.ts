/**
 * The header values `k3 serve` judges before any work (src/serve/request-origin.ts and the key
 * check in http.ts): Host, Origin and Authorization, three lines `host`, `origin`, `auth` of one
 * input. In process only (they reach k3 as HTTP headers). Besides the contract, the verdicts
 * must agree with plain rules: a Host answers only when its name is one of the server's, an
 * Origin only when it is the server's own page or one allowed, and a bearer token only when it
 * is a single run of visible characters after the scheme.
 */
import { usageError } from "../../../src/errors.ts";
import { bearerToken } from "../../../src/serve/http.ts";
import { hostAllowed, hostName, originAllowed, originPolicy } from "../../../src/serve/request-origin.ts";
import { text, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateText } from "../mutate.ts";

const policy = originPolicy("127.0.0.1", 8000, ["k3.internal"], ["http://localhost:3000"]);

/** Accepted headers (the mutations reach the refusals: other names, ports, schemes, "null"). */
const seeds = [
  ["127.0.0.1:8000", "http://127.0.0.1:8000", "Bearer sekrit"],
  ["localhost:8000", "http://localhost:8000", "bearer sekrit"],
  ["[::1]:8000", "http://localhost:3000", "Basic c2Vrcml0"],
  ["k3.internal", "http://[::1]:8000", "BEARER   sekrit"],
];

export const requestHeadersTarget: FuzzTarget = {
  name: "request-headers",
  about: "k3 serve's Host, Origin and Authorization checks (src/serve/request-origin.ts, http.ts bearerToken)",
  seeds: () => seeds.map(([host, origin, auth], i): Seed => ({ label: `headers ${i}`, bytes: utf8(`host ${host}\norigin ${origin}\nauth ${auth}`) })),
  mutate: (input, rng, all) => mutateText(input, rng, all.map((s) => s.bytes)),
  parse(input) {
    const fields = new Map<string, string>();
    for (const line of text(input).split("\n")) {
      const space = line.indexOf(" ");
      if (space > 0) fields.set(line.slice(0, space), line.slice(space + 1));
    }
    const host = fields.get("host") ?? null;
    const origin = fields.get("origin") ?? null;
    const auth = fields.get("auth") ?? null;
    const hostOk = hostAllowed(host, policy);
    const name = host === null ? undefined : hostName(host);
    if (hostOk !== (name !== undefined && policy.hosts.has(name))) throw new Error(`Host ${JSON.stringify(host)}: verdict ${hostOk} against its name ${name}`);
    const originOk = originAllowed(origin, policy);
    if (originOk && origin !== null && !policy.origins.has(origin.trim().toLowerCase().replace(/\/+$/, ""))) {
      const url = new URL(origin.trim().toLowerCase());
      if (url.protocol !== "http:" || url.port !== "8000" || !policy.hosts.has(url.hostname.replace(/^\[(.*)\]$/, "$1"))) {
        throw new Error(`Origin ${JSON.stringify(origin)} allowed, yet neither the server's page nor allowed`);
      }
    }
    const token = bearerToken(auth);
    if (token !== undefined && (/\s/.test(token) || token.length === 0 || !/^bearer /i.test(auth ?? ""))) throw new Error(`Authorization ${JSON.stringify(auth)}: token ${JSON.stringify(token)}`);
    if (!hostOk) throw usageError(`host: ${JSON.stringify(host)} is not a name of this server`);
    if (!originOk) throw usageError(`origin: ${JSON.stringify(origin)} may not use this server`);
    return JSON.stringify({ name, origin: origin === null ? null : origin.trim().toLowerCase(), token: token ?? null });
  },
};
