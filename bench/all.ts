/** `bun run bench`: every benchmark, each printing its figures next to the limit it is measured against. */
import { benchIndex } from "./index-headers.ts";

const index = benchIndex();
console.log(
  `index: ${index.tensors} tensors in ${index.shards} shards (${(index.headerBytes / 1e6).toFixed(1)} MB of headers): ` +
    `median ${index.seconds.toFixed(3)} s of 5`,
);
