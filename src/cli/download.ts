/**
 * `k3 download <dest_dir>`: the checkpoint from the Hub, pinned to one commit, every file's size
 * and hash checked before it gets its name, resumable (src/fetch/download.ts). HF_TOKEN is read
 * from the environment and sent only to the Hub; K3_HUB_URL points at a mirror.
 */
import { join } from "node:path";
import { envValue } from "../env.ts";
import { ExitCode, K3Error, usageError, type ExitCodeValue } from "../errors.ts";
import { checkRepoId, checkRevision, mayCarryToken, parseHubEndpoint, releaseRepo } from "../hub/hub-endpoint.ts";
import { defaultRetryPolicy } from "../hub/hub-http.ts";
import { defaultStallSeconds, defaultWorkers, Downloader, maxWorkers } from "../fetch/download.ts";
import { downloadRecordName } from "../fetch/download-record.ts";
import { addPatterns, emptySelection, type FileSelection } from "../fetch/file-patterns.ts";
import { log } from "../report/log.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { parseCommandArgs, usageText, version, type CommandInfo } from "./usage.ts";

interface DownloadArgs {
  repo: string;
  revision: string;
  workers: number;
  stallSeconds: number;
  selection: FileSelection;
}

const options: readonly OptionDef<DownloadArgs>[] = [
  { name: "revision", value: "REV", description: "Branch, tag or commit sha (default main); resolved to a commit sha, which is recorded", apply: (o, raw) => { o.revision = checkRevision(raw); } },
  { name: "repo", value: "OWNER/NAME", description: `Hub repository (default ${releaseRepo})`, apply: (o, raw) => { o.repo = checkRepoId(raw); } },
  { name: "workers", value: "N", description: `Files downloaded at once (default ${defaultWorkers})`, apply: (o, raw, flag) => { o.workers = parseInteger(raw, flag, 1, maxWorkers); } },
  { name: "include", value: "PATTERNS", description: "Download only paths matching these comma-separated patterns (* ? [..]); repeatable", apply: (o, raw) => addPatterns(o.selection, raw, "include") },
  { name: "exclude", value: "PATTERNS", description: "Skip paths matching these patterns, e.g. 'model-0009[56]-*' (the vision shards); repeatable", apply: (o, raw) => addPatterns(o.selection, raw, "exclude") },
  { name: "stall-seconds", value: "N", description: `Drop and resume a connection that sends nothing for N seconds (default ${defaultStallSeconds})`, apply: (o, raw, flag) => { o.stallSeconds = parseInteger(raw, flag, 1, 3600); } },
  helpOption,
];

const command: CommandInfo<DownloadArgs> = {
  name: "k3 download",
  description: "Download the checkpoint from the Hugging Face Hub, pinned to a commit, resumable, every file's size and sha256 checked (HF_TOKEN, K3_HUB_URL)",
  positionals: [{ name: "dest_dir", description: "Destination directory (created if missing); re-running resumes" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: DownloadArgs = { repo: releaseRepo, revision: "main", workers: defaultWorkers, stallSeconds: defaultStallSeconds, selection: emptySelection() };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const [dest] = positionals;
  if (!dest) throw usageError("download needs <dest_dir>", await usageText(command));
  const endpoint = parseHubEndpoint(envValue("K3_HUB_URL"));
  const token = envValue("HF_TOKEN");
  if (token !== undefined && !mayCarryToken(new URL(endpoint.base), endpoint)) {
    log.warn(`K3_HUB_URL is plain http to ${new URL(endpoint.base).host}: HF_TOKEN is not sent there (only over https, or to loopback)`);
  }
  // The transfers are asynchronous, so a JavaScript listener runs at once: the workers stop,
  // partial files stay, and k3 exits 130 (SIGINT) or 143 (SIGTERM) as other commands do.
  const interrupt = new AbortController();
  let stoppedBy: ExitCodeValue | undefined;
  const onSignal = (code: ExitCodeValue) => () => {
    if (stoppedBy !== undefined) process.exit(code);
    stoppedBy = code;
    log.warn("stopping: partial files are kept, re-run to resume (a second signal quits at once)");
    interrupt.abort();
  };
  const onInt = onSignal(ExitCode.interrupted);
  const onTerm = onSignal(ExitCode.terminated);
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  const downloader = new Downloader({
    dest, repo: parsed.repo, revision: parsed.revision, workers: parsed.workers, selection: parsed.selection, endpoint,
    token, stallSeconds: parsed.stallSeconds, retry: defaultRetryPolicy, userAgent: `k3/${version}`,
    signal: interrupt.signal,
  });
  try {
    const outcome = await downloader.run();
    if (outcome.interrupted) {
      log.warn(`interrupted: ${outcome.fetchedFiles} file(s) finished; partial files stay as <name>.part and the next run resumes them`);
      return stoppedBy ?? ExitCode.interrupted;
    }
    if (outcome.failures.length > 0) {
      for (const failure of outcome.failures) process.stderr.write(`FAILED ${downloader.redact(failure)}\n`);
      throw new K3Error(ExitCode.runtime, `${outcome.failures.length} file(s) not downloaded; every other file is verified (re-run to retry)`);
    }
    log.success(`${outcome.fetchedFiles} file(s) downloaded, ${outcome.keptFiles} already verified: every size and hash matches commit ${outcome.commit}`);
    log.info(`record: ${join(dest, downloadRecordName)}`);
    const next = parsed.repo === releaseRepo ? `k3 verify ${dest} && k3 pack-trunk ${dest} ~/k3trunk` : `k3 verify ${dest}`;
    log.info(`next: ${next}`);
    return ExitCode.ok;
  } catch (error) {
    if (error instanceof K3Error) throw new K3Error(error.exitCode, downloader.redact(error.message), error.detail);
    throw error;
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
}
