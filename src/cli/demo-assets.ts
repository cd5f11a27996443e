/**
 * What `k3 demo` runs: the 13-layer tiny Kimi K3 model (random weights in the released layout;
 * the same bytes as the oracle fixture test/fixtures/tiny13) and a byte-level tokenizer whose 256
 * ranks are the 256 bytes. Both are embedded in the executable and copied to a cache directory on
 * first use, because the checkpoint reader opens real files.
 */
import modelPath from "../../assets/demo/model-00001-of-00001.safetensors" with { type: "file" };
import configFile from "../../assets/demo/config.json" with { type: "file" };
import rankPath from "../../assets/demo/tiktoken.model" with { type: "file" };
import tokenizerConfigFile from "../../assets/demo/tokenizer_config.json" with { type: "file" };

/** File name in the demo directory -> embedded path. */
export const demoFiles: Record<string, string> = {
  "model-00001-of-00001.safetensors": modelPath,
  "config.json": configFile as unknown as string,
  "tiktoken.model": rankPath,
  "tokenizer_config.json": tokenizerConfigFile as unknown as string,
};
