/**
 * Long work in child processes that a test file needs (the demo gate's runs, the oracle gate's
 * dist/k3 runs, the release binaries): started once per test process, by whoever asks first.
 *
 * The preload asks first, at the start of a run, for the files the run includes (`startEarly`):
 * bun test runs the files one after another, and the first ones (the unit tests) keep one core
 * busy, so these processes run on the other core meanwhile and the file later finds its results
 * ready or nearly so. A file run on its own, or left out of the preload's guess, starts the same
 * work itself when it asks: the results are the same either way, only the waiting differs.
 * Each piece of work has two doors: `start...` (the preload's, which only starts it) and the
 * one the test awaits, which also says the work is `wanted` now.
 */
import { readFileSync } from "node:fs";

const started = new Map<string, Promise<unknown>>();

/**
 * How many of this work's processes run at once: one while the files before run, so that it
 * takes the core they leave idle and not theirs (one test process and one of these: a core
 * each); two once a test waits for the work (`wanted`), or when nothing started it early.
 */
let width = 1;
let running = 0;
const queue: (() => void)[] = [];

/** Runs `run` (which starts a process and waits for it) when a place is free. */
export async function inTurn<T>(run: () => Promise<T>): Promise<T> {
  while (running >= width) await new Promise<void>((resolve) => queue.push(resolve));
  running++;
  try {
    return await run();
  } finally {
    running--;
    queue.shift()?.();
  }
}

/** A test waits for this work: from now on two of its processes run at once. */
export function wanted(): void {
  if (width >= 2) return;
  width = 2;
  queue.shift()?.();
}

/** `start()`'s promise, made on the first call for `key`; every later call gets the same one. */
export function once<T>(key: string, start: () => Promise<T>): Promise<T> {
  let promise = started.get(key) as Promise<T> | undefined;
  if (promise === undefined) {
    promise = start();
    promise.catch(() => {}); // a failure is reported to the test that awaits it, not as an unhandled rejection
    started.set(key, promise);
  }
  return promise;
}

/** Everything started so far, settled: the preload waits for it before the temporary directories go. */
export async function settled(): Promise<void> {
  await Promise.allSettled(started.values());
}

/**
 * Whether `bun test` was asked to run `file` (a path relative to the repository): no path
 * filter on its command line, or one that is part of the path. A name filter (-t) or a
 * --parallel worker says no: starting work for a file that may not run would only slow the run.
 */
export function inThisRun(file: string): boolean {
  let argv: string[];
  try {
    argv = readFileSync("/proc/self/cmdline", "utf8").split("\0").filter(Boolean);
  } catch {
    return false;
  }
  const at = argv.indexOf("test");
  if (at < 0) return false;
  const args = argv.slice(at + 1);
  if (args.some((a) => a === "-t" || a.startsWith("--test-name-pattern") || a.startsWith("--test-worker") || a.startsWith("--parallel"))) return false;
  const filters = args.filter((a) => !a.startsWith("-"));
  return filters.length === 0 || filters.some((f) => file.includes(f.replace(/^\.\//, "")));
}
