/**
 * Every fuzz target, one line each: a parser k3 gains joins the harness by a file in this folder
 * and a line here.
 */
import type { FuzzTarget, Seed } from "../harness.ts";
import { argvTarget } from "./argv.ts";
import { batchFileTarget } from "./batch-file.ts";
import { benchResultsTarget } from "./bench-results.ts";
import { chatRequestTarget } from "./chat-request.ts";
import { chatStreamTarget } from "./chat-stream.ts";
import { completionRequestTarget } from "./completion-request.ts";
import { configTarget } from "./config.ts";
import { downloadRecordTarget } from "./download-record.ts";
import { draftTrunkJsonTarget } from "./draft-trunk-json.ts";
import { expertTraceTarget } from "./expert-trace.ts";
import { hubAnswersTarget } from "./hub-answers.ts";
import { jsonSchemaTarget } from "./json-schema.ts";
import { messagesRequestTarget } from "./messages-request.ts";
import { responsesRequestTarget } from "./responses-request.ts";
import { idsTextTarget } from "./ids-text.ts";
import { requestHeadersTarget } from "./request-headers.ts";
import { safetensorsTarget } from "./safetensors.ts";
import { stateFileTarget } from "./state-file.ts";
import { tiktokenTarget } from "./tiktoken.ts";
import { tokenizerConfigTarget } from "./tokenizer-config.ts";
import { trunkBinTarget } from "./trunk-bin.ts";
import { trunkCompressedTarget } from "./trunk-compressed.ts";
import { trunkJsonTarget } from "./trunk-json.ts";

export const targets: readonly FuzzTarget<Seed>[] = [
  safetensorsTarget,
  configTarget,
  tiktokenTarget,
  tokenizerConfigTarget,
  trunkJsonTarget,
  trunkBinTarget,
  trunkCompressedTarget,
  draftTrunkJsonTarget,
  argvTarget,
  chatRequestTarget,
  completionRequestTarget,
  idsTextTarget,
  expertTraceTarget,
  stateFileTarget,
  hubAnswersTarget,
  downloadRecordTarget,
  chatStreamTarget,
  requestHeadersTarget,
  batchFileTarget,
  benchResultsTarget,
  jsonSchemaTarget,
  messagesRequestTarget,
  responsesRequestTarget,
];
