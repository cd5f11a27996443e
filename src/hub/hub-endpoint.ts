/**
 * Where the Hub is and the addresses k3 asks it for: the revision info, the tree listing and a
 * file's bytes (huggingface_hub's model_info, list_repo_tree and hf_hub_url). The endpoint is
 * https://huggingface.co unless K3_HUB_URL names a mirror (or, in tests, a local fake).
 */
import { usageError } from "../errors.ts";

export const defaultHubUrl = "https://huggingface.co";
export const releaseRepo = "moonshotai/Kimi-K3";

export interface HubEndpoint {
  /** The base URL without a trailing slash, e.g. https://huggingface.co or http://127.0.0.1:8080/hf. */
  base: string;
  /** Only requests to this origin may carry the token. */
  origin: string;
}

const loopbackHosts = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** True when a token may be sent to `url`: the Hub's own origin, over https or to loopback. */
export function mayCarryToken(url: URL, endpoint: HubEndpoint): boolean {
  if (url.origin !== endpoint.origin) return false;
  return url.protocol === "https:" || loopbackHosts.has(url.hostname);
}

/** The endpoint from K3_HUB_URL (or the default); `source` names where the text came from. */
export function parseHubEndpoint(raw: string | undefined, source = "K3_HUB_URL"): HubEndpoint {
  if (raw === undefined) return { base: defaultHubUrl, origin: new URL(defaultHubUrl).origin };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usageError(`${source}: '${raw}' is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw usageError(`${source}: only http and https are supported, got ${url.protocol}`);
  if (url.username || url.password) throw usageError(`${source}: the URL must not carry credentials; put the token in HF_TOKEN`);
  if (url.search || url.hash) throw usageError(`${source}: the URL must not have a query or fragment`);
  return { base: url.href.replace(/\/+$/, ""), origin: url.origin };
}

const repoPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

/** `owner/name`, as the Hub spells repository ids; a usage error naming --repo otherwise. */
export function checkRepoId(repo: string): string {
  if (!repoPattern.test(repo) || repo.includes("..")) throw usageError(`--repo expects owner/name (letters, digits, '.', '_', '-'), got '${repo}'`);
  return repo;
}

/** A branch, tag or commit sha; refused when it could not be one. */
export function checkRevision(revision: string): string {
  // eslint-disable-next-line no-control-regex
  if (revision.length === 0 || revision.length > 255 || /[\u0000-\u0020\u007f~^:?*[\\]/.test(revision) || revision.includes("..")) {
    throw usageError(`--revision expects a branch, tag or commit sha, got '${revision}'`);
  }
  return revision;
}

const encodePath = (path: string) => path.split("/").map(encodeURIComponent).join("/");

export const revisionUrl = (e: HubEndpoint, repo: string, revision: string): string =>
  `${e.base}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;

export const treeUrl = (e: HubEndpoint, repo: string, sha: string): string =>
  `${e.base}/api/models/${repo}/tree/${sha}?recursive=true`;

export const resolveUrl = (e: HubEndpoint, repo: string, sha: string, path: string): string =>
  `${e.base}/${repo}/resolve/${sha}/${encodePath(path)}`;

/** Where a person fixes access: the repository's page on the Hub. */
export const repoPageUrl = (e: HubEndpoint, repo: string): string => `${e.base}/${repo}`;
