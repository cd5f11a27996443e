/**
 * Who may talk to the server (chat.md 4.1): the Host header must name this server, so a web
 * page that rebinds its own hostname to 127.0.0.1 is refused (DNS rebinding), and a browser's
 * Origin must be this server's own page or one the operator allowed, so another site cannot
 * drive a generation with a cross-origin POST. Requests without an Origin (curl, SDKs) are not
 * from a browser page and pass the second check. Pure functions of the header values.
 */

export interface OriginPolicy {
  /** Host names (lower case, IPv6 without brackets) the server answers to. */
  readonly hosts: ReadonlySet<string>;
  /** Origins allowed besides the server's own (`scheme://host[:port]`, lower case); "*" allows any. */
  readonly origins: ReadonlySet<string>;
  /** The port the server listens on: its own page's origin carries it. */
  readonly port: number;
}

/** The names every server answers to, plus the address it binds and the names the operator adds. */
export function originPolicy(bound: string, port: number, extraHosts: readonly string[], extraOrigins: readonly string[]): OriginPolicy {
  const hosts = new Set(["localhost", "127.0.0.1", "::1", bare(bound), ...extraHosts.map(bare)]);
  return { hosts, origins: new Set(extraOrigins.map(normalOrigin)), port };
}

const bare = (name: string) => name.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
const normalOrigin = (origin: string) => origin.trim().toLowerCase().replace(/\/+$/, "");

/** The host name of a Host header value (`name`, `name:port`, `[v6]:port`), or undefined when it is not one. */
export function hostName(header: string): string | undefined {
  const match = header.trim().toLowerCase().match(/^(?:\[([0-9a-f:.]+)\]|([a-z0-9._-]+))(?::(\d{1,5}))?$/);
  if (!match) return undefined;
  return match[1] ?? match[2];
}

/** Whether the Host header names this server (a request without one is refused: HTTP/1.1 requires it). */
export function hostAllowed(header: string | null, policy: OriginPolicy): boolean {
  const name = header === null ? undefined : hostName(header);
  return name !== undefined && policy.hosts.has(name);
}

/**
 * Whether a request with this Origin may be answered: no Origin (not a browser page), the
 * server's own page (one of its names, its port, http), or an origin the operator allowed.
 */
export function originAllowed(header: string | null, policy: OriginPolicy): boolean {
  if (header === null) return true;
  const origin = normalOrigin(header);
  if (policy.origins.has("*") || policy.origins.has(origin)) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // "null" (a sandboxed frame, a file) and anything else that is not an origin
  }
  if (url.protocol !== "http:" || url.origin !== origin) return false;
  return policy.hosts.has(bare(url.hostname)) && Number(url.port || "80") === policy.port;
}
