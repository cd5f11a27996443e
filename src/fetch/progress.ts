/**
 * One progress display for long byte-moving work (downloading, hashing): bytes done of the
 * total, the rate over the last seconds, the time left, and a count of files. On a terminal it is
 * one line redrawn in place on stderr; otherwise (a log, a pipe, a test) a plain line every few
 * seconds through consola, so a log never fills with carriage returns.
 */
import { log } from "../report/log.ts";
import { formatBytes } from "../units.ts";

/** The rate is measured over this window, so a stall shows quickly and a burst does not linger. */
const rateWindowMs = 10_000;
const terminalRedrawMs = 250;
const logLineMs = 5_000;

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "--";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export const formatRate = (bytesPerSecond: number): string => `${(bytesPerSecond / 1e6).toFixed(1)} MB/s`;

export class ByteProgress {
  readonly #label: string;
  readonly #totalBytes: number;
  readonly #totalFiles: number;
  readonly #terminal: boolean;
  readonly #started = performance.now();
  #doneBytes = 0;
  /** Bytes moved in this run (what the rate is made of), as opposed to bytes found already done. */
  #movedBytes = 0;
  #doneFiles = 0;
  #samples: { at: number; moved: number }[] = [];
  #lastDraw = 0;
  #drawn = false;

  constructor(label: string, totalBytes: number, totalFiles: number, terminal = process.stderr.isTTY === true) {
    this.#label = label;
    this.#totalBytes = totalBytes;
    this.#totalFiles = totalFiles;
    this.#terminal = terminal;
    this.#samples.push({ at: this.#started, moved: 0 });
  }

  /** Bytes moved now (downloaded, hashed). */
  add(bytes: number): void {
    this.#doneBytes += bytes;
    this.#movedBytes += bytes;
    this.#tick();
  }

  /** Bytes that count as done without being moved now (already on disk, skipped). */
  credit(bytes: number): void {
    this.#doneBytes += bytes;
    this.#tick();
  }

  /** Bytes that must be done again (a transfer that restarted from the beginning). */
  debit(bytes: number): void {
    this.#doneBytes = Math.max(0, this.#doneBytes - bytes);
  }

  fileDone(): void {
    this.#doneFiles++;
    this.#tick();
  }

  /** The rate over the last window, in bytes per second. */
  rate(now = performance.now()): number {
    while (this.#samples.length > 1 && now - (this.#samples[1] as { at: number }).at > rateWindowMs) this.#samples.shift();
    const first = this.#samples[0] as { at: number; moved: number };
    const seconds = (now - first.at) / 1000;
    return seconds > 0 ? (this.#movedBytes - first.moved) / seconds : 0;
  }

  get movedBytes(): number {
    return this.#movedBytes;
  }

  get seconds(): number {
    return (performance.now() - this.#started) / 1000;
  }

  line(now = performance.now()): string {
    const rate = this.rate(now);
    const left = this.#totalBytes - this.#doneBytes;
    const percent = this.#totalBytes > 0 ? ((100 * this.#doneBytes) / this.#totalBytes).toFixed(1) : "100.0";
    const eta = left <= 0 ? "0s" : rate > 0 ? formatDuration(left / rate) : "--";
    return `${this.#label} ${formatBytes(this.#doneBytes)} of ${formatBytes(this.#totalBytes)} (${percent}%)  ` +
      `${formatRate(rate)}  ETA ${eta}  ${this.#doneFiles}/${this.#totalFiles} files`;
  }

  #tick(): void {
    const now = performance.now();
    const last = this.#samples[this.#samples.length - 1] as { at: number };
    if (now - last.at >= 500) this.#samples.push({ at: now, moved: this.#movedBytes });
    if (now - this.#lastDraw < (this.#terminal ? terminalRedrawMs : logLineMs)) return;
    this.#lastDraw = now;
    this.#draw(now);
  }

  #draw(now: number): void {
    if (this.#terminal) {
      process.stderr.write(`\r\u001B[K${this.line(now)}`);
      this.#drawn = true;
    } else {
      log.info(this.line(now));
    }
  }

  /** The last state, drawn once more; the terminal line is ended so later output starts clean. */
  finish(): void {
    const now = performance.now();
    if (this.#terminal) {
      process.stderr.write(`\r\u001B[K${this.line(now)}\n`);
      this.#drawn = false;
    } else {
      log.info(this.line(now));
    }
  }

  /** Ends a terminal line mid-way (before a message), so the message is not drawn over. */
  interrupt(): void {
    if (this.#terminal && this.#drawn) process.stderr.write("\n");
    this.#drawn = false;
  }
}
