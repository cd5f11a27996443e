/**
 * A program under a real pseudo-terminal, as a person runs it: `script` (util-linux) gives the
 * child a pty, keystrokes go in (Ctrl-C as byte 3, turned into SIGINT-like input by the tty), and
 * everything the terminal shows comes back, ANSI escapes stripped.
 */
import type { Subprocess } from "bun";

const ansi = /\u001b\[[0-9;?]*[A-Za-z]|\u001b[=>]/g;

export class PtySession {
  readonly #child: Subprocess<"pipe", "pipe", "pipe">;
  #screen = "";

  constructor(argv: readonly string[], env: Record<string, string> = {}) {
    const line = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
    this.#child = Bun.spawn(["script", "-qfec", line, "/dev/null"], {
      stdin: "pipe", stdout: "pipe", stderr: "pipe", env: { ...process.env, TERM: "xterm", COLUMNS: "200", LINES: "50", ...env },
    });
    void this.#read();
  }

  async #read(): Promise<void> {
    const decoder = new TextDecoder();
    for await (const chunk of this.#child.stdout) this.#screen += decoder.decode(chunk, { stream: true });
  }

  /** What the terminal has shown so far, escapes removed. */
  get screen(): string {
    return this.#screen.replace(ansi, "").replaceAll("\r", "");
  }

  send(keys: string): void {
    this.#child.stdin.write(keys);
    this.#child.stdin.flush();
  }

  /** Waits until `pattern` matches what was shown after `from` (a length of `screen`); bounded. */
  async waitFor(pattern: RegExp, from = 0, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const match = this.screen.slice(from).match(pattern);
      if (match) return match;
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${pattern}; the screen shows:\n${this.screen.slice(-2000)}`);
      await Bun.sleep(20);
    }
  }

  async exited(timeoutMs = 10_000): Promise<number> {
    const timer = setTimeout(() => this.#child.kill(), timeoutMs);
    const code = await this.#child.exited;
    clearTimeout(timer);
    return code;
  }

  kill(): void {
    this.#child.kill();
  }
}
