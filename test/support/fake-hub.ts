/**
 * A fake Hugging Face Hub for the download tests: the three endpoints k3 uses (revision info,
 * recursive tree listing with Link paging, resolve with Range) on loopback, a second server as
 * the CDN that LFS files redirect to, and faults a test can ask for per file: failing statuses,
 * connections cut or stalled mid-file, wrong bytes, a listing that lies. It logs every request
 * (path, Range, whether a token came) and counts the bytes it served per file. Everything is
 * bounded: a stall ends by itself after `maxStallMs`.
 */
import type { Server } from "bun";

export interface FakeFile {
  path: string;
  bytes: Uint8Array;
  lfs: boolean;
}

export interface FileFault {
  /** The first `times` requests answer `status` (default 500). */
  fail?: { times: number; status?: number; retryAfter?: number };
  /**
   * The first `times` transfers end after `afterBytes` bytes of the answer: a chunked answer that
   * ends early, or with `reset` a raw connection dropped under a larger Content-Length.
   */
  cut?: { times: number; afterBytes: number; reset?: boolean };
  /** The first `times` transfers stop sending after `afterBytes` bytes (until aborted or bounded). */
  stall?: { times: number; afterBytes: number };
  /** Every request answers this status. */
  status?: number;
  /** Bytes served instead of the file's own (the listing still describes the file's own). */
  serve?: Uint8Array;
  /** Answer 200 with the whole file whatever the Range. */
  ignoreRange?: boolean;
  /** Stream the answer (no Content-Length), as chunked transfers do. */
  stream?: boolean;
}

export interface RequestLog {
  path: string;
  range: string | null;
  authorization: string | null;
  server: "hub" | "cdn";
  status: number;
}

export interface FakeHubOptions {
  repo: string;
  commit: string;
  files: FakeFile[];
  /** When set, the hub answers 401 to requests without `Bearer <token>`. */
  token?: string;
  pageSize?: number;
  faults?: Record<string, FileFault>;
  /** Listing entries overridden or added verbatim (a lying or hostile listing). */
  listing?: (entries: Record<string, unknown>[]) => unknown;
  /** Forced statuses of the API endpoints. */
  revisionStatus?: { status: number; errorCode?: string };
  /** Faults of the API endpoints: the first `times` revision requests answer `status`. */
  revisionFail?: { times: number; status: number };
  /** Where a Link header of the listing points instead of the hub (a hostile next page). */
  linkOrigin?: string;
}

export const maxStallMs = 20_000;
const chunkBytes = 64 * 1024;

function sha256Hex(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

function gitOid(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha1").update(`blob ${bytes.byteLength}\0`).update(bytes).digest("hex");
}

export class FakeHub {
  readonly options: FakeHubOptions;
  readonly requests: RequestLog[] = [];
  readonly servedBytes = new Map<string, number>();
  readonly #requestCounts = new Map<string, number>();
  readonly #transferCounts = new Map<string, number>();
  #revisionRequests = 0;
  readonly hub: Server<undefined>;
  readonly cdn: Server<undefined>;
  /** A raw TCP server that answers with a Content-Length and then drops the connection. */
  readonly dropper: Bun.TCPSocketListener<undefined>;

  constructor(options: FakeHubOptions) {
    this.options = options;
    this.cdn = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => this.#cdn(req) });
    this.hub = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => this.#hub(req) });
    this.dropper = Bun.listen({
      hostname: "127.0.0.1", port: 0,
      socket: { data: (socket, data) => this.#drop(socket, data.toString("latin1")) },
    });
  }

  /** Serves a transfer over a raw socket: headers with the full Content-Length, part of the body, then a hard close. */
  #drop(socket: { write(data: string | Uint8Array): number; terminate(): void }, request: string): void {
    const [line = "", ...headerLines] = request.split("\r\n");
    const path = decodeURIComponent((line.split(" ")[1] ?? "").replace(/^\/blob\//, "").replace(/\?.*$/, ""));
    const file = this.options.files.find((f) => f.path === path);
    const cut = this.options.faults?.[path]?.cut;
    if (!file || !cut) return socket.terminate();
    const range = headerLines.find((h) => h.toLowerCase().startsWith("range:"))?.match(/bytes=(\d+)-/);
    const start = range ? Number(range[1]) : 0;
    const body = file.bytes.subarray(start, Math.min(file.bytes.byteLength, start + cut.afterBytes));
    this.requests.push({ path: `file:${path}`, range: range ? `bytes=${start}-` : null, authorization: null, server: "cdn", status: start > 0 ? 206 : 200 });
    const status = start > 0 ? "206 Partial Content" : "200 OK";
    const extra = start > 0 ? `content-range: bytes ${start}-${file.bytes.byteLength - 1}/${file.bytes.byteLength}\r\n` : "";
    socket.write(`HTTP/1.1 ${status}\r\ncontent-length: ${file.bytes.byteLength - start}\r\n${extra}content-type: application/octet-stream\r\n\r\n`);
    socket.write(body);
    this.#count(path, body.byteLength);
    setTimeout(() => socket.terminate(), 50);
  }

  get url(): string {
    return `http://127.0.0.1:${this.hub.port}`;
  }

  stop(): void {
    this.hub.stop(true);
    this.cdn.stop(true);
    this.dropper.stop(true);
  }

  /** Requests for a file's bytes (resolve and CDN), in order. */
  transfers(path: string): RequestLog[] {
    return this.requests.filter((r) => r.path === `file:${path}`);
  }

  listingEntries(): Record<string, unknown>[] {
    const dirs = new Set<string>();
    for (const f of this.options.files) {
      const parts = f.path.split("/");
      for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
    }
    return [
      ...[...dirs].map((path) => ({ type: "directory", oid: "0".repeat(40), path })),
      ...this.options.files.map((f) => ({
        type: "file", oid: gitOid(f.bytes), size: f.bytes.byteLength, path: f.path,
        ...(f.lfs ? { lfs: { oid: sha256Hex(f.bytes), size: f.bytes.byteLength, pointerSize: 134 } } : {}),
      })),
    ];
  }

  #log(req: Request, path: string, server: "hub" | "cdn", status: number): void {
    this.requests.push({ path, range: req.headers.get("range"), authorization: req.headers.get("authorization"), server, status });
  }

  #authorized(req: Request): boolean {
    return this.options.token === undefined || req.headers.get("authorization") === `Bearer ${this.options.token}`;
  }

  #json(req: Request, path: string, body: unknown, headers: Record<string, string> = {}): Response {
    this.#log(req, path, "hub", 200);
    return Response.json(body, { headers });
  }

  #error(req: Request, path: string, status: number, errorCode?: string, server: "hub" | "cdn" = "hub"): Response {
    this.#log(req, path, server, status);
    return new Response(JSON.stringify({ error: `fake ${status}` }), {
      status, headers: { "content-type": "application/json", ...(errorCode ? { "x-error-code": errorCode } : {}) },
    });
  }

  #hub(req: Request): Response | Promise<Response> {
    const url = new URL(req.url);
    const { repo, commit } = this.options;
    const api = `/api/models/${repo}/`;
    if (url.pathname.startsWith(`${api}revision/`)) {
      const revision = decodeURIComponent(url.pathname.slice(`${api}revision/`.length));
      if (!this.#authorized(req)) return this.#error(req, "revision", 401);
      this.#revisionRequests++;
      const fail = this.options.revisionFail;
      if (fail && this.#revisionRequests <= fail.times) return this.#error(req, "revision", fail.status);
      const forced = this.options.revisionStatus;
      if (forced) return this.#error(req, "revision", forced.status, forced.errorCode);
      if (revision !== "main" && revision !== commit) return this.#error(req, "revision", 404, "RevisionNotFound");
      return this.#json(req, "revision", { id: repo, sha: commit, siblings: this.options.files.map((f) => ({ rfilename: f.path })) });
    }
    if (url.pathname === `${api}tree/${commit}`) {
      if (!this.#authorized(req)) return this.#error(req, "tree", 401);
      if (url.searchParams.get("recursive") !== "true") return this.#error(req, "tree", 400);
      const all = this.listingEntries();
      const listed = this.options.listing ? this.options.listing(all) : all;
      const size = this.options.pageSize;
      if (!size || !Array.isArray(listed)) return this.#json(req, "tree", listed);
      const start = Number(url.searchParams.get("cursor") ?? "0");
      const page = listed.slice(start, start + size);
      const headers: Record<string, string> = {};
      if (start + size < listed.length) {
        const origin = this.options.linkOrigin ?? this.url;
        headers.link = `<${origin}${api}tree/${commit}?recursive=true&cursor=${start + size}>; rel="next"`;
      }
      return this.#json(req, "tree", page, headers);
    }
    const resolve = `/${repo}/resolve/${commit}/`;
    if (url.pathname.startsWith(resolve)) {
      const path = url.pathname.slice(resolve.length).split("/").map(decodeURIComponent).join("/");
      if (!this.#authorized(req)) return this.#error(req, `file:${path}`, 401);
      const file = this.options.files.find((f) => f.path === path);
      if (!file) return this.#error(req, `file:${path}`, 404, "EntryNotFound");
      if (file.lfs) {
        // LFS bytes live on the CDN: a redirect, which must not carry the token.
        this.#log(req, `resolve:${path}`, "hub", 302);
        return new Response(null, { status: 302, headers: { location: `http://127.0.0.1:${this.cdn.port}/blob/${encodeURIComponent(path)}?sig=x` } });
      }
      return this.#serve(req, file, "hub");
    }
    return this.#error(req, url.pathname, 404, "RepoNotFound");
  }

  #cdn(req: Request): Response | Promise<Response> {
    const url = new URL(req.url);
    const path = decodeURIComponent(url.pathname.slice("/blob/".length));
    const file = this.options.files.find((f) => f.path === path);
    if (!file) return this.#error(req, `file:${path}`, 404, undefined, "cdn");
    return this.#serve(req, file, "cdn");
  }

  #serve(req: Request, file: FakeFile, server: "hub" | "cdn"): Response {
    const key = `file:${file.path}`;
    const fault = this.options.faults?.[file.path] ?? {};
    const count = (this.#requestCounts.get(file.path) ?? 0) + 1;
    this.#requestCounts.set(file.path, count);
    if (fault.status) return this.#error(req, key, fault.status, fault.status === 404 ? "EntryNotFound" : undefined, server);
    if (fault.fail && count <= fault.fail.times) {
      const response = this.#error(req, key, fault.fail.status ?? 500, undefined, server);
      if (fault.fail.retryAfter !== undefined) response.headers.set("retry-after", String(fault.fail.retryAfter));
      return response;
    }
    const bytes = fault.serve ?? file.bytes;
    const range = req.headers.get("range");
    const match = range?.match(/^bytes=(\d+)-$/);
    const start = match && !fault.ignoreRange ? Number(match[1]) : 0;
    if (start > bytes.byteLength) return this.#error(req, key, 416, undefined, server);
    if (start === bytes.byteLength && start > 0) return this.#error(req, key, 416, undefined, server);
    const transfer = (this.#transferCounts.get(file.path) ?? 0) + 1;
    this.#transferCounts.set(file.path, transfer);
    const partial = start > 0;
    const status = partial ? 206 : 200;
    this.#log(req, key, server, status);
    const headers: Record<string, string> = { "content-type": "application/octet-stream", "accept-ranges": "bytes" };
    if (partial) headers["content-range"] = `bytes ${start}-${bytes.byteLength - 1}/${bytes.byteLength}`;
    const cut = fault.cut && transfer <= fault.cut.times ? fault.cut : undefined;
    if (cut?.reset) {
      this.requests.pop();
      this.#log(req, `redirect:${file.path}`, server, 302);
      return new Response(null, { status: 302, headers: { location: `http://127.0.0.1:${this.dropper.port}/blob/${encodeURIComponent(file.path)}` } });
    }
    const stall = fault.stall && transfer <= fault.stall.times ? fault.stall : undefined;
    const body = bytes.subarray(start);
    if (!cut && !stall && !fault.stream) {
      this.#count(file.path, body.byteLength);
      return new Response(body, { status, headers });
    }
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        const limit = cut ? cut.afterBytes : stall ? stall.afterBytes : Infinity;
        if (sent >= body.byteLength) return controller.close();
        if (sent >= limit) {
          if (cut) return controller.close();
          // A stall: nothing more, until the client goes away or the bound is reached.
          const until = performance.now() + maxStallMs;
          while (!req.signal.aborted && performance.now() < until) await Bun.sleep(25);
          return controller.close();
        }
        const n = Math.min(chunkBytes, body.byteLength - sent, limit - sent);
        controller.enqueue(body.slice(sent, sent + n));
        sent += n;
        this.#count(file.path, n);
        await Bun.sleep(1);
      },
    });
    return new Response(stream, { status, headers });
  }

  #count(path: string, n: number): void {
    this.servedBytes.set(path, (this.servedBytes.get(path) ?? 0) + n);
  }
}

/** Deterministic pseudo-random bytes (xorshift), so a test repository is the same every run. */
export function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export { gitOid, sha256Hex };
