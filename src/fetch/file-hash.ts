/**
 * The two digests the Hub lists for a file: sha256 of the bytes (LFS files) and the git blob
 * sha1, sha1("blob <size>\0" + bytes) (files kept in git). Hashers are fed as bytes arrive, so a
 * download hashes what it writes without reading it back; a resumed one first feeds the bytes
 * already on disk.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { errnoCode } from "../fs.ts";
import { runtimeError } from "../errors.ts";

const chunkBytes = 8 * 1024 * 1024;

export class FileDigests {
  readonly #sha256 = new Bun.CryptoHasher("sha256");
  readonly #gitSha1: Bun.CryptoHasher;

  constructor(size: number) {
    this.#gitSha1 = new Bun.CryptoHasher("sha1");
    this.#gitSha1.update(`blob ${size}\0`);
  }

  update(bytes: Uint8Array): void {
    this.#sha256.update(bytes);
    this.#gitSha1.update(bytes);
  }

  digest(): { sha256: string; gitOid: string } {
    return { sha256: this.#sha256.digest("hex"), gitOid: this.#gitSha1.digest("hex") };
  }
}

/**
 * Feeds the first `length` bytes of `path` to `sink`, in chunks, yielding to the event loop
 * between chunks so progress is drawn and signals are heard.
 */
export async function readFileInto(path: string, length: number, sink: (bytes: Uint8Array) => void, signal?: AbortSignal): Promise<void> {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw runtimeError(`${path}: cannot open (${errnoCode(error)})`);
  }
  const buffer = Buffer.allocUnsafe(Math.min(chunkBytes, Math.max(length, 1)));
  try {
    let done = 0;
    while (done < length) {
      if (signal?.aborted) throw runtimeError(`${path}: stopped`);
      let n: number;
      try {
        n = readSync(fd, buffer, 0, Math.min(buffer.length, length - done), done);
      } catch (error) {
        throw runtimeError(`${path}: read failed (${errnoCode(error)})`);
      }
      if (n === 0) throw runtimeError(`${path}: ends after ${done} bytes, ${length} expected`);
      sink(buffer.subarray(0, n));
      done += n;
      await Bun.sleep(0);
    }
  } finally {
    closeSync(fd);
  }
}

/** sha256 (and git blob sha1) of a whole file of `size` bytes. */
export async function hashFile(path: string, size: number, onBytes: (n: number) => void, signal?: AbortSignal): Promise<{ sha256: string; gitOid: string }> {
  const digests = new FileDigests(size);
  await readFileInto(path, size, (bytes) => {
    digests.update(bytes);
    onBytes(bytes.byteLength);
  }, signal);
  return digests.digest();
}
