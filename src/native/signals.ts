/**
 * Ctrl-C and SIGTERM during synchronous work (a run, a pack). A JavaScript signal listener
 * would wait for the work to end, so libk3 records the signal (zig/signals.zig) and the work
 * polls `stopIfSignalled` between layers, steps and chunks. The error it throws unwinds like
 * any other: native memory is freed, temporaries are removed, nothing claims to be complete,
 * and the process exits 130 (SIGINT) or 143 (SIGTERM) with one line.
 */
import { ExitCode, K3Error } from "../errors.ts";
import { native } from "./library.ts";

const signalNames: Record<number, { name: string; exitCode: typeof ExitCode.interrupted | typeof ExitCode.terminated }> = {
  2: { name: "SIGINT", exitCode: ExitCode.interrupted },
  15: { name: "SIGTERM", exitCode: ExitCode.terminated },
};

let watching = false;

/** From now on SIGINT and SIGTERM stop the work at its next poll instead of killing the process. */
export function watchSignals(): void {
  if (watching) return;
  native().k3_signals_watch();
  watching = true;
}

/** Throws the interruption (exit 130 or 143) if a watched signal has arrived; cheap enough per layer. */
export function stopIfSignalled(): void {
  if (!watching) return;
  const signal = native().k3_signal_pending();
  if (signal === 0) return;
  const known = signalNames[signal] ?? { name: `signal ${signal}`, exitCode: ExitCode.interrupted };
  throw new K3Error(known.exitCode, `interrupted by ${known.name}; stopped without writing any output`);
}
