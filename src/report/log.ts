/**
 * Everything for people goes to stderr through consola; stdout carries only data (ids, JSON,
 * text when asked), so k3 can sit in a shell pipeline.
 */
import { createConsola } from "consola";

// The level is fixed: consola would otherwise go quiet under NODE_ENV=test or CI, and what k3
// tells people must not depend on the environment it runs in.
export const log = createConsola({
  level: 3,
  stdout: process.stderr,
  stderr: process.stderr,
  formatOptions: { date: false },
});

/** Writes data to stdout, unadorned. */
export function emit(text: string | Uint8Array): void {
  process.stdout.write(text);
}
