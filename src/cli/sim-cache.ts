/**
 * `k3 sim-cache <expert_trace.bin>`: replays a recorded expert trace at many cache sizes under
 * LRU, Belady and PIN+LRU (runtime.md 6.7), so the cost of a policy or a budget is known before
 * a long run pays for it. The whole report is the command's data and goes to stdout.
 */
import { argumentName, ExitCode, quoteArgument, usageError } from "../errors.ts";
import { percentText } from "../report/format.ts";
import { emit } from "../report/log.ts";
import { replayAll, prepareReplay, reuseCount, type ReplayRow, type ReplayTrace } from "../offline/cache-sim.ts";
import { maxTraceRequests, readTraceFile, type ExpertTrace } from "../weights/expert-trace.ts";
import { formatGb } from "../units.ts";
import { findInfoFlag, parseInteger, parseOptions, type OptionDef, type PositionalDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { usageText, type CommandInfo } from "./usage.ts";

/** K3's routed expert: 17,547,264 bytes of MXFP4, read whole (runtime.md 6.1). */
export const defaultExpertBytes = 17_547_264;
/** Buffered expert reads measured under a 32 GB cgroup cap (runtime.md 6.1). */
export const defaultDiskMbs = 1234;
/** Capacities of the published table, in GB. */
export const defaultCapacitiesGb: readonly number[] = [8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1450];
/** top-k + 1: the engine refuses a smaller arena, which would evict an expert still in use. */
export const minCacheSlots = 17;
/** K3 routes each token to 16 experts per MoE layer; the trace itself does not record k. */
export const k3TopK = 16;
/** 896 experts x 92 MoE layers: the pool a trace's distinct experts are a fraction of. */
export const k3RoutedExperts = 82_432;
const maxExpertBytes = 2 ** 40;
/** A petabyte: far past any machine, and it keeps slot counts exact integers. */
const maxCapacityGb = 1_000_000;
const maxSlots = 2 ** 31 - 1;
/** A terabyte per second: beyond any device, and it keeps SEC/TOK printable. */
const maxDiskMbs = 1_000_000;
const hottestShown = 6;

type Capacity = { unit: "GB"; value: number } | { unit: "slots"; value: number };

export interface SimCacheOptions {
  tracePath: string;
  expertBytes: number;
  diskMbs: number;
  /** Given with --tokens; otherwise estimated from the trace. */
  tokens: number | undefined;
  capacities: Capacity[];
}

function defaultSimCacheOptions(): SimCacheOptions {
  return {
    tracePath: "",
    expertBytes: defaultExpertBytes,
    diskMbs: defaultDiskMbs,
    tokens: undefined,
    capacities: defaultCapacitiesGb.map((value) => ({ unit: "GB", value })),
  };
}

function parsePositive(raw: string, flag: string, max: number): number {
  if (!/^(\d+\.?\d*|\.\d+)$/.test(raw.trim())) throw usageError(`${flag} expects a positive number, got ${quoteArgument(raw)}`);
  const value = Number(raw);
  if (!(value > 0 && value <= max)) throw usageError(`${flag} must be above 0 and at most ${max}, got ${argumentName(raw)}`);
  return value;
}

function parseList(raw: string, flag: string, parseOne: (part: string) => number): number[] {
  const parts = raw.split(",").map((p) => p.trim());
  if (parts.some((p) => p.length === 0)) throw usageError(`${flag} expects a comma-separated list, got ${quoteArgument(raw)}`);
  return parts.map(parseOne);
}

export const simCachePositionals: readonly PositionalDef[] = [
  { name: "expert_trace", description: "expert_trace.bin from --dump-cache-trace: int32 little-endian (layer, expert) pairs" },
];

export const simCacheOptionTable: readonly OptionDef<SimCacheOptions>[] = [
  {
    name: "expert-bytes", value: "N",
    description: `Bytes read per expert miss (default ${defaultExpertBytes}, K3's MXFP4 expert)`,
    apply: (o, raw, flag) => {
      o.expertBytes = parseInteger(raw, flag, 1, maxExpertBytes);
    },
  },
  {
    name: "disk-mbs", value: "X",
    description: `Expert read bandwidth in MB/s for SEC/TOK (default ${defaultDiskMbs})`,
    apply: (o, raw, flag) => {
      o.diskMbs = parsePositive(raw, flag, maxDiskMbs);
    },
  },
  {
    name: "tokens", value: "N",
    description: `Tokens behind the trace, prefill included (default requests / (${k3TopK} x MoE layers seen), K3's top-k)`,
    apply: (o, raw, flag) => {
      o.tokens = parseInteger(raw, flag, 1, maxTraceRequests);
    },
  },
  {
    name: "capacities", value: "GB,GB",
    description: `Cache sizes in GB (default ${defaultCapacitiesGb.join(",")})`,
    apply: (o, raw, flag) => {
      o.capacities = parseList(raw, flag, (part) => parsePositive(part, flag, maxCapacityGb)).map((value) => ({ unit: "GB", value }));
    },
  },
  {
    name: "slots", value: "N,N",
    description: "Cache sizes in expert slots, instead of GB",
    apply: (o, raw, flag) => {
      o.capacities = parseList(raw, flag, (part) => parseInteger(part, flag, 1, maxSlots)).map((value) => ({ unit: "slots", value }));
    },
  },
  helpOption,
];

export const simCacheCommand: CommandInfo<SimCacheOptions> = {
  name: "k3 sim-cache",
  description: `Replay an expert trace at many cache sizes under LRU, Belady and PIN+LRU (sizes under ${minCacheSlots} slots are skipped)`,
  positionals: simCachePositionals,
  options: simCacheOptionTable,
};

export function parseSimCacheArgs(args: readonly string[]): SimCacheOptions {
  const options = defaultSimCacheOptions();
  const positionals = parseOptions(args, simCacheOptionTable, options);
  const [tracePath, extra] = positionals;
  if (tracePath === undefined) throw usageError("missing <expert_trace.bin>");
  if (extra !== undefined) throw usageError(`unexpected argument ${argumentName(extra)} (give one trace file)`);
  options.tracePath = tracePath;
  return options;
}


interface TraceFacts {
  trace: ReplayTrace;
  /** Replay keys are layer x stride + expert, with stride one past the largest expert id. */
  stride: number;
  requests: number;
  tokens: number;
  /** How many tokens: "about <n>" when estimated, "<n>" when given. */
  tokensText: string;
  tokensNote: string;
}

function traceFacts(recorded: ExpertTrace, givenTokens: number | undefined): TraceFacts {
  const stride = recorded.experts.reduce((max, e) => Math.max(max, e), 0) + 1;
  const keys = new Float64Array(recorded.layers.length);
  for (let i = 0; i < keys.length; i++) keys[i] = recorded.layers[i]! * stride + recorded.experts[i]!;
  const trace = prepareReplay(keys);
  const requests = trace.keys.length;
  if (givenTokens !== undefined) {
    return { trace, stride, requests, tokens: givenTokens, tokensText: `${givenTokens}`, tokensNote: "given with --tokens" };
  }
  const layers = new Set(Array.from(trace.original, (key) => Math.floor(key / stride))).size;
  // The trace does not say how many experts a token selects, so K3's top-k is assumed; the
  // estimate is a floor, like the original's n / 1472, but never 0 so per-token figures exist.
  const tokens = Math.max(1, Math.floor(requests / (k3TopK * layers)));
  return {
    trace, stride, requests, tokens,
    tokensText: `about ${tokens}`,
    tokensNote: `requests / (top-${k3TopK} x ${layers} MoE layer(s) in the trace); --tokens overrides`,
  };
}

function header(facts: TraceFacts, expertBytes: number): string {
  const { trace, stride, requests, tokens } = facts;
  const perToken = requests / tokens;
  const hottest = Array.from(trace.hottest.subarray(0, hottestShown), (id) => {
    const key = trace.original[id]!;
    return `L${Math.floor(key / stride)}/e${key % stride} x${trace.counts[id]}`;
  });
  const reuse = reuseCount(trace);
  return [
    `trace: ${requests} requests, ${trace.distinct} distinct experts, ${facts.tokensText} token(s)`,
    `  tokens   : ${facts.tokensNote}`,
    `  distinct : ${trace.distinct} of the ${k3RoutedExperts} routed experts of K3 (${percentText(trace.distinct, k3RoutedExperts)})`,
    `  uncached : ${Number.isInteger(perToken) ? perToken : perToken.toFixed(1)} reads x ${(expertBytes / 1e6).toFixed(2)} MB ` +
      `= ${formatGb(perToken * expertBytes)} GB per token if nothing were cached`,
    `  hottest  : ${hottest.join("  ")}`,
    `  reuse    : ${reuse} of ${requests} requests (${percentText(reuse, requests)}) repeat an earlier key`,
    "",
  ].join("\n");
}

interface PlannedRow {
  label: string;
  slots: number;
}

function planRows(options: SimCacheOptions): { rows: PlannedRow[]; skipped: PlannedRow[] } {
  const planned = options.capacities.map((c): PlannedRow =>
    c.unit === "GB"
      ? { label: `${c.value} GB`, slots: Math.floor((c.value * 1e9) / options.expertBytes) }
      : { label: `${formatGb(c.value * options.expertBytes)} GB`, slots: c.value },
  );
  return { rows: planned.filter((r) => r.slots >= minCacheSlots), skipped: planned.filter((r) => r.slots < minCacheSlots) };
}

const columns = ["CACHE", "SLOTS", "LRU", "BELADY", "PIN+LRU", "GB READ/TOK", "SEC/TOK"] as const;

function table(cells: string[][]): string {
  const widths = columns.map((title, c) => Math.max(title.length, ...cells.map((row) => row[c]!.length)));
  // CACHE reads as a label, left-aligned; the rest are numbers, right-aligned.
  const line = (row: readonly string[]) =>
    row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ");
  return [line(columns), ...cells.map(line)].join("\n");
}

function rowCells(row: ReplayRow, label: string, facts: TraceFacts, options: SimCacheOptions): string[] {
  const readGbPerToken = (row.lru.misses * options.expertBytes) / facts.tokens / 1e9;
  return [
    label,
    String(row.slots),
    percentText(row.lru.hits, facts.requests),
    percentText(row.belady.hits, facts.requests),
    percentText(row.pinLru.hits, facts.requests),
    readGbPerToken.toFixed(2),
    ((readGbPerToken * 1000) / options.diskMbs).toFixed(2),
  ];
}

function footer(facts: TraceFacts, expertBytes: number, skipped: readonly PlannedRow[]): string {
  const { trace, requests } = facts;
  const lines = [
    `compulsory misses: ${trace.distinct} (one per distinct expert); no policy at any size hits more than ${percentText(reuseCount(trace), requests)}`,
    `every expert touched: ${formatGb(trace.distinct * expertBytes)} GB; the whole pool: ${formatGb(k3RoutedExperts * expertBytes)} GB`,
  ];
  if (skipped.length > 0) {
    const list = skipped.map((r) => `${r.label} (${r.slots} slots)`).join(", ");
    lines.push(`skipped: ${list}: under the ${minCacheSlots}-slot minimum (top-k + 1)`);
  }
  return lines.join("\n");
}

export function simCacheReport(recorded: ExpertTrace, options: SimCacheOptions): string {
  const facts = traceFacts(recorded, options.tokens);
  const { rows, skipped } = planRows(options);
  const cells = rows.map((r) => rowCells(replayAll(facts.trace, r.slots), r.label, facts, options));
  return `${header(facts, options.expertBytes)}\n${table(cells)}\n\n${footer(facts, options.expertBytes, skipped)}\n`;
}

export async function main(args: readonly string[]): Promise<number> {
  if (findInfoFlag(args, simCacheOptionTable, ["help"])) {
    emit(await usageText(simCacheCommand));
    return ExitCode.ok;
  }
  if (args.length === 0) throw usageError("missing <expert_trace.bin>", await usageText(simCacheCommand));
  const options = parseSimCacheArgs(args);
  emit(simCacheReport(readTraceFile(options.tracePath), options));
  return ExitCode.ok;
}
