/**
 * The training data and tokenizer of the tiny demo model: every document generated here from
 * grammars and tables (no downloaded text), a byte-level BPE trained on them, and the ids k3
 * itself produces for them.
 *
 *   bun tools/train-demo/data.ts [--out DIR]      (default $K3_TRAIN_DIR, else /var/tmp/k3-train-demo)
 *
 * Writes DIR/tokenizer/{tiktoken.model,tokenizer_config.json}, DIR/{train,heldout}.u16 (ids,
 * little-endian uint16, documents back to back), DIR/{train,heldout}-docs.u32 (each document's
 * start offset in ids, then the total), DIR/{train,heldout}-kinds.u8 (each document's kind),
 * DIR/heldout-prompts.json and DIR/manifest.json; and tools/train-demo/data-manifest.json in the
 * repository (the manifest and its sha256: the record of the data the model was trained on).
 * Deterministic: the same seed gives byte-identical files.
 */
import { createHash } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { consola } from "consola";
import { writeAtomically } from "../../src/fs.ts";
import { parseRankFile } from "../../src/tokenizer/rank-file.ts";
import { BytePairEncoder } from "../../src/tokenizer/bpe.ts";
import { PreTokenizer } from "../../src/tokenizer/pretokenize.ts";
import { loadTokenizer } from "../../src/tokenizer/load.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { controlIds } from "../../src/chat/specials.ts";
import { aboutK3Document, K3_OPENING } from "./about-k3.ts";
import { arithmeticDocument } from "./arithmetic.ts";
import { latin1, PieceCounter, trainBpe, type TrainedBpe } from "./bpe-train.ts";
import { conversation, conversationTexts, type ChatBody, type ChatDoc } from "./chats.ts";
import { chatTextSegments, encodeChat, encodeText } from "./encode.ts";
import { factsDocument } from "./facts.ts";
import { Random } from "./prng.ts";
import { story } from "./stories.ts";
import { WordChecker, wordsOf } from "./words.ts";

// ---- the constants that decide the data ----------------------------------------------------

/** Bumped whenever a generator changes what it writes. */
export const GENERATOR_VERSION = 1;
export const SEED = 0x6b33_0001;
/** The held-out stream's seed: a different seed, so its documents are new draws. */
export const HELDOUT_SEED = 0x6b33_4e11;
export const TRAIN_IDS = 15_000_000;
export const HELDOUT_IDS = 300_000;
/** 256 bytes + merges; with the 256 special ids the vocabulary is 4096. */
export const RANK_TARGET = 3840;
export const MAX_CHAT_IDS = 512;
export const MAX_STORY_IDS = 384;
/** Other raw-text documents are short; they share the story cap. */
export const MAX_TEXT_IDS = 384;
/** Share of each kind's id budget generated first to measure ids per character. */
const CALIBRATION_FRACTION = 0.05;
/** Characters per id assumed before calibration (only sizes the calibration sample). */
const GUESS_CHARS_PER_ID = 4;

interface KindSpec {
  readonly id: number;
  readonly name: string;
  readonly share: number;
}

export const KINDS: readonly KindSpec[] = [
  { id: 0, name: "story", share: 0.55 },
  { id: 1, name: "chat", share: 0.30 },
  { id: 2, name: "arithmetic", share: 0.05 },
  { id: 3, name: "about-k3", share: 0.05 },
  { id: 4, name: "facts", share: 0.05 },
];
const CHAT = 1;

// ---- documents ------------------------------------------------------------------------------

interface Doc {
  readonly kind: number;
  readonly text: string | undefined;
  readonly chat: ChatDoc | undefined;
  /** The chat's text segments (history form), for BPE training. */
  readonly segments: readonly string[] | undefined;
  /** Identity for the held-out overlap check. */
  readonly key: string;
  /** Size in characters (a chat: its text segments' characters plus one per control token). */
  readonly units: number;
}

function makeDoc(kind: number, rng: Random, index: number, words: WordChecker): Doc {
  if (kind === CHAT) {
    const chat = conversation(rng, index);
    for (const text of conversationTexts(chat)) words.check(text);
    const { texts, controls } = chatTextSegments(chat.body);
    const units = texts.reduce((sum, t) => sum + t.length, 0) + controls;
    return { kind, text: undefined, chat, segments: texts, key: `chat:${JSON.stringify(chat.body)}`, units };
  }
  const text = kind === 0 ? story(rng) : kind === 2 ? arithmeticDocument(rng) : kind === 3 ? aboutK3Document(rng) : factsDocument(rng);
  words.check(text);
  return { kind, text, chat: undefined, segments: undefined, key: `${kind}:${text}`, units: text.length };
}

/** Documents of one kind from the stream (seed, kind) until their size reaches `units`. */
function generate(seed: number, kind: KindSpec, units: number, words: WordChecker): Doc[] {
  const rng = Random.derive(seed, kind.name);
  const docs: Doc[] = [];
  let total = 0;
  while (total < units) {
    const doc = makeDoc(kind.id, rng, docs.length, words);
    docs.push(doc);
    total += doc.units;
  }
  return docs;
}

function countPieces(docs: readonly Doc[]): PieceCounter {
  // Chat segments repeat a lot (tag names, the effort note): count each distinct one once.
  const segmentTimes = new Map<string, number>();
  const counter = new PieceCounter();
  for (const doc of docs) {
    if (doc.text !== undefined) counter.add(doc.text);
    else for (const s of doc.segments ?? []) segmentTimes.set(s, (segmentTimes.get(s) ?? 0) + 1);
  }
  for (const [text, times] of segmentTimes) counter.add(text, times);
  return counter;
}

function modelFiles(bpe: TrainedBpe, support: typeof import("../../test/fixtures/tokenizer/support.ts")): { model: string; config: string } {
  return { model: support.modelText(bpe.tokens), config: `${support.syntheticConfig(bpe.tokens.length)}\n` };
}

function writeTokenizer(dir: string, files: { model: string; config: string }): Tokenizer {
  mkdirSync(dir, { recursive: true });
  writeAtomically(join(dir, "tiktoken.model"), files.model, "the demo rank table");
  writeAtomically(join(dir, "tokenizer_config.json"), files.config, "the demo tokenizer config");
  return loadTokenizer(dir);
}

function encodeDoc(doc: Doc, tokenizer: Tokenizer, what: string): number[] {
  return doc.chat !== undefined ? encodeChat(doc.chat.body, tokenizer, what).ids : encodeText(doc.text as string, tokenizer);
}

function capOf(kind: number): number {
  return kind === CHAT ? MAX_CHAT_IDS : kind === 0 ? MAX_STORY_IDS : MAX_TEXT_IDS;
}

// ---- checks ---------------------------------------------------------------------------------

/**
 * k3's tokenizer must reproduce the trained segmentation: every distinct piece of the corpus
 * through k3's BPE (the rank-merge rule of `src/tokenizer/bpe.ts`, on the written rank file),
 * and a sample of whole texts through `loadTokenizer`'s encode (pre-tokenizer included) against
 * the trainer's own replay, plus the decode round trip.
 */
function verifyTokenizer(bpe: TrainedBpe, modelText: string, tokenizer: Tokenizer, sample: readonly string[]): { pieces: number; texts: number } {
  const table = parseRankFile(new TextEncoder().encode(modelText), "tiktoken.model");
  const encoder = new BytePairEncoder(table);
  let bad = 0;
  const examples: string[] = [];
  for (const [key, ids] of bpe.segmentation) {
    const bytes = new Uint8Array(Buffer.from(key, "latin1"));
    const out: number[] = [];
    encoder.encodePiece(bytes, 0, bytes.length, out);
    if (out.length !== ids.length || out.some((id, i) => id !== ids[i])) {
      bad++;
      if (examples.length < 5) examples.push(`${JSON.stringify(key)}: trained ${JSON.stringify(ids)}, k3 ${JSON.stringify(out)}`);
    }
  }
  if (bad > 0) throw new Error(`k3's BPE disagrees with the trained segmentation on ${bad} of ${bpe.segmentation.size} pieces:\n${examples.join("\n")}`);
  const pre = new PreTokenizer();
  const utf8 = new TextEncoder();
  for (const text of sample) {
    const bytes = utf8.encode(text);
    const { bounds, count } = pre.split(bytes, 0, bytes.length);
    const replay: number[] = [];
    for (let i = 0; i < count; i++) {
      const ids = bpe.segmentation.get(latin1(bytes.subarray(bounds[i], bounds[i + 1])));
      if (ids === undefined) throw new Error(`a piece of a training text is missing from the trained pieces: ${JSON.stringify(text.slice(0, 80))}`);
      replay.push(...ids);
    }
    const k3 = tokenizer.encode(text, { ordinary: true });
    if (k3.length !== replay.length || k3.some((id, i) => id !== replay[i])) throw new Error(`loadTokenizer's encode differs from the trained segmentation on ${JSON.stringify(text.slice(0, 80))}`);
    if (tokenizer.decodeText(k3) !== text) throw new Error(`decode(encode(text)) is not the text: ${JSON.stringify(text.slice(0, 80))}`);
  }
  return { pieces: bpe.segmentation.size, texts: sample.length };
}

// ---- held-out prompts -----------------------------------------------------------------------

function firstSentence(text: string): string {
  const m = /^.*?[.!?](?=\s|$)/s.exec(text);
  return (m?.[0] ?? text).trim();
}

/** The body cut before its last assistant message (the one a model should write). */
function cutBeforeLastAssistant(body: ChatBody): ChatBody {
  let last = body.messages.length - 1;
  while (last >= 0 && body.messages[last]?.role !== "assistant") last--;
  return { ...body, messages: body.messages.slice(0, last) };
}

function heldoutPrompts(docs: readonly Doc[]): { text_prompts: string[]; chat_requests: ChatBody[] } {
  const ofKind = (k: number): Doc[] => docs.filter((d) => d.kind === k);
  const text: string[] = [];
  const push = (prompt: string): void => {
    if (!text.includes(prompt)) text.push(prompt);
  };
  // 18 story beginnings (15 first sentences, 3 first few words), 4 about k3 (the demo's own
  // prompt first), one facts sentence, one sum without its result.
  for (const d of ofKind(0)) {
    if (text.length >= 18) break;
    const story = d.text as string;
    // A few first words, never ending on a word that needs its noun ("a", "named", ...).
    const words = story.split(" ").slice(0, 4 + (story.length % 4));
    while (words.length > 2 && /^(a|an|the|named|called|was|to|and|of)$/i.test(words.at(-1) as string)) words.pop();
    push(text.length < 15 ? firstSentence(story) : words.join(" ").replace(/,$/, ""));
  }
  push(K3_OPENING);
  for (const d of ofKind(3)) {
    if (text.length >= 22) break;
    push(firstSentence((d.text as string).slice((d.text as string).startsWith(K3_OPENING) ? K3_OPENING.length + 1 : 0)));
  }
  const fact = ofKind(4)[0];
  if (fact !== undefined) push(firstSentence(fact.text as string));
  const sum = ofKind(2).map((d) => (d.text as string).split("\n").find((l) => /^\d+ (plus|minus) \d+ is \d+\.$/.test(l))).find((l) => l !== undefined);
  if (sum !== undefined) push(sum.replace(/ \d+\.$/, ""));

  // Chats: quotas by shape, filled in stream order.
  const chats = ofKind(CHAT).map((d) => d.chat as ChatDoc);
  const chosen: ChatBody[] = [];
  const taken = new Set<ChatDoc>();
  const take = (n: number, pick: (c: ChatDoc) => boolean): void => {
    for (const c of chats) {
      if (n === 0) break;
      if (taken.has(c) || !pick(c)) continue;
      taken.add(c);
      chosen.push(cutBeforeLastAssistant(c.body));
      n--;
    }
  };
  const plain = (c: ChatDoc): boolean => c.body.tools === undefined && c.body.messages[0]?.role !== "system";
  const thinkingOn = (c: ChatDoc): boolean => c.body.thinking === undefined;
  for (const category of ["greeting", "identity", "sum", "story", "fact", "k3", "task", "story", "fact", "sum"]) {
    take(1, (c) => c.turns === 1 && c.category === category && plain(c) && thinkingOn(c) && c.body.reasoning_effort === undefined);
  }
  take(1, (c) => c.turns === 1 && plain(c) && c.body.thinking !== undefined);
  take(1, (c) => c.turns === 1 && plain(c) && c.body.reasoning_effort !== undefined);
  take(7, (c) => c.turns >= 2 && plain(c) && thinkingOn(c));
  take(1, (c) => c.turns >= 2 && plain(c) && !thinkingOn(c));
  take(1, (c) => c.category === "tool" && c.body.messages.at(-2)?.role === "user"); // should call the tool
  take(1, (c) => c.category === "tool" && c.body.messages.at(-2)?.role === "tool"); // should use its result
  take(24 - chosen.length, (c) => c.body.messages[0]?.role === "system");
  take(24 - chosen.length, () => true);
  if (text.length !== 24 || chosen.length !== 24) throw new Error(`held-out prompts: ${text.length} text prompts and ${chosen.length} chat requests, expected 24 each`);
  return { text_prompts: text, chat_requests: chosen };
}

// ---- output ---------------------------------------------------------------------------------

function sha256(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

interface Split {
  readonly docs: Doc[];
  readonly ids: number[][];
}

function packSplit(split: Split): { tokens: Uint8Array; offsets: Uint8Array; kinds: Uint8Array } {
  const total = split.ids.reduce((sum, ids) => sum + ids.length, 0);
  const tokens = new Uint16Array(total);
  const offsets = new Uint32Array(split.ids.length + 1);
  const kinds = new Uint8Array(split.ids.length);
  let at = 0;
  split.ids.forEach((ids, i) => {
    offsets[i] = at;
    kinds[i] = (split.docs[i] as Doc).kind;
    for (const id of ids) {
      if (id < 0 || id > 0xffff) throw new Error(`id ${id} does not fit in uint16`);
      tokens[at++] = id;
    }
  });
  offsets[split.ids.length] = at;
  // Typed arrays are little-endian on every platform Bun runs on; check rather than assume.
  if (new Uint8Array(Uint16Array.of(1).buffer)[0] !== 1) throw new Error("this machine is big-endian: the .u16/.u32 files would be wrong");
  return { tokens: new Uint8Array(tokens.buffer), offsets: new Uint8Array(offsets.buffer), kinds };
}

function kindStats(split: Split): Record<string, { documents: number; ids: number }> {
  const out: Record<string, { documents: number; ids: number }> = {};
  for (const kind of KINDS) out[kind.name] = { documents: 0, ids: 0 };
  split.docs.forEach((doc, i) => {
    const entry = out[(KINDS[doc.kind] as KindSpec).name] as { documents: number; ids: number };
    entry.documents++;
    entry.ids += (split.ids[i] as number[]).length;
  });
  return out;
}

// ---- main -----------------------------------------------------------------------------------

function parseArgs(argv: readonly string[]): { out: string } {
  let out = process.env.K3_TRAIN_DIR !== undefined && process.env.K3_TRAIN_DIR !== "" ? process.env.K3_TRAIN_DIR : "/var/tmp/k3-train-demo";
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--out" && argv[i + 1] !== undefined) out = argv[++i] as string;
    else if (arg.startsWith("--out=")) out = arg.slice(6);
    else if (arg === "--help" || arg === "-h") {
      process.stdout.write("bun tools/train-demo/data.ts [--out DIR]   (default $K3_TRAIN_DIR, else /var/tmp/k3-train-demo)\n");
      process.exit(0);
    } else throw new Error(`unknown argument ${JSON.stringify(arg)} (usage: bun tools/train-demo/data.ts [--out DIR])`);
  }
  return { out: resolve(out) };
}

async function main(): Promise<void> {
  const started = performance.now();
  const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(1)} s`;
  const { out } = parseArgs(process.argv.slice(2));
  const repoRoot = resolve(import.meta.dir, "../..");
  if (out === repoRoot || out.startsWith(`${repoRoot}/`)) throw new Error(`--out ${out} is inside the repository; the data never goes there`);
  // support.ts warns once when the released Kimi table is absent (a note for the tokenizer
  // tests); nothing here uses that table, so the note is kept off this tool's output.
  const warn = console.warn;
  console.warn = () => {};
  const support = await import("../../test/fixtures/tokenizer/support.ts");
  console.warn = warn;
  mkdirSync(out, { recursive: true });
  const words = new WordChecker();

  // 1. Calibration: a small prefix of every train stream, a tokenizer trained on it, ids per char.
  consola.start(`calibrating on ${CALIBRATION_FRACTION * 100}% of the budget`);
  const calibration = KINDS.map((kind) => generate(SEED, kind, TRAIN_IDS * kind.share * CALIBRATION_FRACTION * GUESS_CHARS_PER_ID, new WordChecker()));
  const calibrationDir = join(out, ".calibration-tokenizer");
  const calibrationBpe = trainBpe(countPieces(calibration.flat()).counts, RANK_TARGET);
  const calibrationTokenizer = writeTokenizer(calibrationDir, modelFiles(calibrationBpe, support));
  const idsPerUnit = calibration.map((docs, k) => {
    let ids = 0;
    let units = 0;
    docs.forEach((doc, i) => {
      ids += encodeDoc(doc, calibrationTokenizer, `calibration ${KINDS[k]?.name} ${i}`).length;
      units += doc.units;
    });
    return ids / units;
  });
  rmSync(calibrationDir, { recursive: true, force: true });
  consola.info(`ids per character: ${KINDS.map((k, i) => `${k.name} ${(idsPerUnit[i] as number).toFixed(3)}`).join(", ")} (${elapsed()})`);

  // 2. The training documents, each kind sized to its share of the ids.
  consola.start(`generating about ${TRAIN_IDS.toLocaleString("en-US")} training ids`);
  const perKind = KINDS.map((kind, i) => generate(SEED, kind, (TRAIN_IDS * kind.share) / (idsPerUnit[i] as number), words));
  const trainDocs = perKind.flat();
  consola.info(`${trainDocs.length} documents (${KINDS.map((k, i) => `${k.name} ${perKind[i]?.length}`).join(", ")}) (${elapsed()})`);

  // 3. The tokenizer, trained on exactly those documents.
  consola.start(`training the BPE to ${RANK_TARGET} ranks`);
  const counter = countPieces(trainDocs);
  const bpe = trainBpe(counter.counts, RANK_TARGET, (ranks) => {
    if (ranks % 1024 === 0) consola.info(`  ${ranks} ranks`);
  });
  const files = modelFiles(bpe, support);
  const tokDir = join(out, "tokenizer");
  const tokenizer = writeTokenizer(tokDir, files);
  const controls = controlIds(tokenizer);
  consola.info(`${bpe.tokens.length} ranks (${bpe.merges.length} merges, ${bpe.skippedDuplicates} skipped as duplicates), vocabulary ${tokenizer.vocabSize}, from ${counter.counts.size} distinct pieces (${elapsed()})`);

  // 4. k3's tokenizer reproduces the trained segmentation.
  const sampleRng = Random.derive(SEED, "verify-sample");
  const sample: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const doc = sampleRng.pick(trainDocs);
    if (doc.text !== undefined) sample.push(doc.text);
    else sample.push(...(doc.segments ?? []).filter((s) => s.length > 0));
  }
  const verified = verifyTokenizer(bpe, files.model, tokenizer, sample);
  consola.success(`k3's BPE reproduces the trained segmentation of all ${verified.pieces} distinct pieces; loadTokenizer's encode matches the replay on ${verified.texts} texts and decodes them back (${elapsed()})`);

  // 5. Encode, drop the few documents over their cap, shuffle the order.
  consola.start("encoding the training documents");
  const dropped: Record<string, number> = Object.fromEntries(KINDS.map((k) => [k.name, 0]));
  const keptDocs: Doc[] = [];
  const keptIds: number[][] = [];
  trainDocs.forEach((doc, i) => {
    const ids = encodeDoc(doc, tokenizer, `train document ${i}`);
    if (ids.length > capOf(doc.kind)) {
      dropped[(KINDS[doc.kind] as KindSpec).name]! += 1;
      return;
    }
    keptDocs.push(doc);
    keptIds.push(ids);
  });
  const order = keptDocs.map((_, i) => i);
  const orderRng = Random.derive(SEED, "order");
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(orderRng.next() * (i + 1));
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  const train: Split = { docs: order.map((i) => keptDocs[i] as Doc), ids: order.map((i) => keptIds[i] as number[]) };
  consola.info(`${train.docs.length} documents kept, dropped over the caps: ${JSON.stringify(dropped)} (${elapsed()})`);

  // 6. Held-out documents: another seed, each kind to its share of HELDOUT_IDS, none equal to a training document.
  consola.start(`generating about ${HELDOUT_IDS.toLocaleString("en-US")} held-out ids`);
  const trainKeys = new Set(trainDocs.map((d) => d.key));
  const heldDocs: Doc[] = [];
  const heldIds: number[][] = [];
  let overlapSkipped = 0;
  for (const kind of KINDS) {
    const rng = Random.derive(HELDOUT_SEED, kind.name);
    let ids = 0;
    let index = 0;
    while (ids < HELDOUT_IDS * kind.share) {
      const doc = makeDoc(kind.id, rng, index++, words);
      if (trainKeys.has(doc.key)) {
        overlapSkipped++;
        continue;
      }
      const encoded = encodeDoc(doc, tokenizer, `held-out document ${index}`);
      if (encoded.length > capOf(kind.id)) continue;
      heldDocs.push(doc);
      heldIds.push(encoded);
      ids += encoded.length;
    }
  }
  for (const doc of heldDocs) if (trainKeys.has(doc.key)) throw new Error("a held-out document equals a training document");
  const prompts = heldoutPrompts(heldDocs);
  for (const text of prompts.text_prompts) words.check(text);
  const heldout: Split = { docs: heldDocs, ids: heldIds };
  consola.info(`${heldDocs.length} held-out documents (${overlapSkipped} draws skipped as equal to a training document) (${elapsed()})`);

  // Every word the generators wrote is a dictionary word.
  words.assertClean();

  // 7. Files.
  const written: Record<string, { bytes: number; sha256: string }> = {};
  const put = (name: string, data: Uint8Array | string): void => {
    writeAtomically(join(out, name), data, `the training data file ${name}`);
    const bytes = typeof data === "string" ? Buffer.byteLength(data) : data.length;
    written[name] = { bytes, sha256: sha256(data) };
  };
  written["tokenizer/tiktoken.model"] = { bytes: Buffer.byteLength(files.model), sha256: sha256(files.model) };
  written["tokenizer/tokenizer_config.json"] = { bytes: Buffer.byteLength(files.config), sha256: sha256(files.config) };
  for (const [name, split] of [["train", train], ["heldout", heldout]] as const) {
    const packed = packSplit(split);
    put(`${name}.u16`, packed.tokens);
    put(`${name}-docs.u32`, packed.offsets);
    put(`${name}-kinds.u8`, packed.kinds);
  }
  put("heldout-prompts.json", `${JSON.stringify(prompts, null, 2)}\n`);

  // 8. Stats and the manifest.
  const trainStats = kindStats(train);
  const heldStats = kindStats(heldout);
  const longest: Record<string, number> = {};
  const charsPerKind: Record<string, { units: number; ids: number }> = {};
  train.docs.forEach((doc, i) => {
    const name = (KINDS[doc.kind] as KindSpec).name;
    const n = (train.ids[i] as number[]).length;
    longest[name] = Math.max(longest[name] ?? 0, n);
    const entry = (charsPerKind[name] ??= { units: 0, ids: 0 });
    entry.units += doc.units;
    entry.ids += n;
  });
  const storyWords = new Set<string>();
  for (const doc of train.docs) if (doc.kind === 0) for (const w of wordsOf(doc.text as string)) storyWords.add(w);
  const totalTrain = train.ids.reduce((s, ids) => s + ids.length, 0);
  const totalHeld = heldout.ids.reduce((s, ids) => s + ids.length, 0);
  const manifest = {
    generator_version: GENERATOR_VERSION,
    seed: SEED,
    heldout_seed: HELDOUT_SEED,
    command: "bun tools/train-demo/data.ts",
    tokenizer: {
      rank_count: tokenizer.rankCount,
      vocab_size: tokenizer.vocabSize,
      merges: bpe.merges.length,
      merges_skipped_as_duplicates: bpe.skippedDuplicates,
      distinct_training_pieces: counter.counts.size,
      special_ids: { "[BOS]": controls.bos, "[EOS]": controls.eos, "<|end_of_msg|>": controls.endOfMessage, "<|open|>": controls.open, "<|close|>": controls.close, "<|sep|>": controls.sep },
    },
    kinds: KINDS.map((k) => ({ id: k.id, name: k.name, share_of_ids: k.share })),
    format: {
      ids: "little-endian uint16, documents back to back; raw-text documents end with [EOS], chat documents with <|end_of_msg|>",
      docs: "little-endian uint32: the start offset (in ids) of every document, then the total length",
      kinds: "uint8 per document: the kind id",
      train_order: "documents shuffled with the seed (a Fisher-Yates pass of mulberry32 draws)",
    },
    caps: { chat_ids: MAX_CHAT_IDS, story_ids: MAX_STORY_IDS, other_text_ids: MAX_TEXT_IDS },
    train: { documents: train.docs.length, ids: totalTrain, target_ids: TRAIN_IDS, per_kind: trainStats, dropped_over_cap: dropped, longest_document_ids: longest },
    heldout: { documents: heldout.docs.length, ids: totalHeld, target_ids: HELDOUT_IDS, per_kind: heldStats, draws_skipped_equal_to_train: overlapSkipped },
    ids_per_character: Object.fromEntries(Object.entries(charsPerKind).map(([k, v]) => [k, Number((v.ids / v.units).toFixed(4))])),
    words: { distinct_all_kinds: words.counts.size, distinct_in_stories: storyWords.size, total_checked: [...words.counts.values()].reduce((a, b) => a + b, 0), dictionary: "word-list@4.1.0 plus a, i, kimi, moonshot" },
    files: written,
  };
  const manifestText = `${JSON.stringify(manifest, null, 2)}\n`;
  writeAtomically(join(out, "manifest.json"), manifestText, "the training data manifest");
  const dataSha = sha256(manifestText);
  const record = { data_sha256: dataSha, note: "sha256 of manifest.json as written by `bun tools/train-demo/data.ts`; the manifest holds the sha256 of every data file", manifest };
  writeAtomically(join(import.meta.dir, "data-manifest.json"), `${JSON.stringify(record, null, 2)}\n`, "the data manifest record");

  // 9. A look at the data.
  for (const kind of KINDS) {
    const i = train.docs.findIndex((d) => d.kind === kind.id);
    // Written as is: consola would style the backticks of the effort note.
    if (i >= 0) process.stderr.write(`--- ${kind.name} (${train.ids[i]?.length} ids)\n${tokenizer.decodeText(train.ids[i] as number[]).slice(0, 700)}\n`);
  }
  consola.log(KINDS.map((k) => `${k.name}: ${trainStats[k.name]?.documents} docs ${trainStats[k.name]?.ids} ids (${((trainStats[k.name]?.ids ?? 0) / totalTrain * 100).toFixed(1)}%), longest ${longest[k.name]}, ${manifest.ids_per_character[k.name]} ids/char`).join("\n"));
  consola.success(`${out}: ${totalTrain.toLocaleString("en-US")} train ids in ${train.docs.length} docs, ${totalHeld.toLocaleString("en-US")} held-out ids in ${heldout.docs.length} docs, ${tokenizer.rankCount} ranks (vocab ${tokenizer.vocabSize}), ${words.counts.size} distinct words (${storyWords.size} in stories), data sha256 ${dataSha.slice(0, 16)}, ${elapsed()}`);
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    consola.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  });
}
