/** Command dispatch and the one place errors become messages and exit codes. */
import { ExitCode, K3Error } from "../errors.ts";
import { findSubcommand } from "./commands.ts";
import { runMain } from "./run.ts";

function printError(error: K3Error): void {
  process.stderr.write(`k3: ${error.message}\n`);
  if (error.detail) process.stderr.write(error.detail.endsWith("\n") ? error.detail : `${error.detail}\n`);
}

/** Runs the command line and returns the exit code; never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const subcommand = findSubcommand(argv[0]);
    if (subcommand) return await (await subcommand.load()).main(argv.slice(1));
    return await runMain(argv);
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
