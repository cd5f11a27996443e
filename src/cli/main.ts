/**
 * Command dispatch, the top-level usage (which lists the subcommands), and the one place errors
 * become messages and exit codes.
 */
import { ExitCode, K3Error, usageError } from "../errors.ts";
import { emit } from "../report/log.ts";
import { kernelsVersionLine, presetListing } from "../report/plan-report.ts";
import { findInfoFlag } from "./args.ts";
import { findSubcommand, subcommands } from "./commands.ts";
import { runCommand } from "./run-options.ts";
import { usageText, version } from "./usage.ts";

function printError(error: K3Error): void {
  process.stderr.write(`k3: ${error.message}\n`);
  if (error.detail) process.stderr.write(error.detail.endsWith("\n") ? error.detail : `${error.detail}\n`);
}

const runUsage = () => usageText(runCommand, subcommands);

/** The version, and the kernel variant libk3 chose on this machine (loading it to ask). */
async function versionText(): Promise<string> {
  const { kernelVariant } = await import("../native/kernel-runtime.ts");
  return `k3 ${version}\n${kernelsVersionLine(kernelVariant())}\n`;
}

/** `k3 <model_dir> ...`: the info flags are answered before anything else is checked. */
async function runOrInfo(argv: readonly string[]): Promise<number> {
  const info = findInfoFlag(argv, runCommand.options, ["help", "version", "list-presets"]);
  if (info === "help") emit(await runUsage());
  if (info === "version") emit(await versionText());
  if (info === "list-presets") emit(presetListing());
  if (info) return ExitCode.ok;
  if (argv.length === 0) throw usageError("missing <model_dir>", await runUsage());
  return (await import("./run.ts")).main(argv);
}

/** Runs the command line and returns the exit code; never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const subcommand = findSubcommand(argv[0]);
    if (subcommand) return await (await subcommand.load()).main(argv.slice(1));
    return await runOrInfo(argv);
  } catch (error) {
    if (error instanceof K3Error) {
      printError(error);
      return error.exitCode;
    }
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`k3: internal error: ${message}\n`);
    return ExitCode.runtime;
  }
}
