/**
 * The chat page's routes, with the headers a browser needs to keep it to itself: the page's
 * Content-Security-Policy as a header (a meta tag cannot say frame-ancestors), no framing
 * (frame-ancestors 'none', X-Frame-Options for older browsers), no sniffing, no referrer.
 * Built into the executable, the page is a bundle of files (`files`); each is served at its
 * own path with these headers. Run from source (the tests' own process), Bun bundles the page
 * on demand and serves it as is.
 */
import type { HTMLBundle } from "bun";
import { basename } from "node:path";

export const pageHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
} as const;

interface BundledFile {
  path: string;
  loader: string;
  headers: Record<string, string>;
}

export function pageRoutes(page: HTMLBundle): Record<string, HTMLBundle | (() => Response)> {
  const files = (page as HTMLBundle & { files?: BundledFile[] }).files;
  if (!files) return { "/": page };
  const routes: Record<string, () => Response> = {};
  for (const file of files) {
    const at = file.loader === "html" ? "/" : `/${basename(file.path)}`;
    routes[at] = () => new Response(Bun.file(file.path), { headers: { ...file.headers, ...pageHeaders } });
  }
  return routes;
}
