/**
 * Everything for people goes to stderr through consola; stdout carries only data (ids, JSON,
 * text when asked), so k3 can sit in a shell pipeline.
 */
import { createConsola } from "consola";

export const log = createConsola({
  stdout: process.stderr,
  stderr: process.stderr,
  formatOptions: { date: false },
});

/** Writes data to stdout, unadorned. */
export function emit(text: string): void {
  process.stdout.write(text);
}
