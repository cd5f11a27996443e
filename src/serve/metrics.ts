/**
 * `GET /metrics` in the Prometheus text format (0.0.4): counters, gauges and histograms of what
 * the server did, named after vLLM's where one exists (`k3:` for its `vllm:`), so dashboards
 * written for it read k3's. The one table of metric names is `metricHelp`; everything is counted
 * in http.ts as requests come and go, and gauges are read when scraped.
 */

/** Every metric: its type and help line. */
export const metricHelp = {
  "k3:requests_total": ["counter", "HTTP requests answered, by endpoint and status code"],
  "k3:prompt_tokens_total": ["counter", "Prompt ids of the generation requests answered"],
  "k3:generation_tokens_total": ["counter", "Ids generated"],
  "k3:prompt_tokens_reused_total": ["counter", "Prompt ids served from held state instead of prefilled, by where they came from"],
  "k3:time_to_first_token_seconds": ["histogram", "From a generation request's arrival to its first generated id"],
  "k3:time_per_output_token_seconds": ["histogram", "Decode seconds per generated id after the first, per request"],
  "k3:request_queue_time_seconds": ["histogram", "Seconds a generation request waited for its turn"],
  "k3:num_requests_running": ["gauge", "Generations running now"],
  "k3:num_requests_waiting": ["gauge", "Generation requests waiting for a turn"],
  "k3:batch_rows_per_step": ["gauge", "Rows per batched step so far, on average (--parallel)"],
  "k3:bytes_read_total": ["counter", "Bytes read from disk (trunk and experts) since the server started"],
  "k3:bytes_read_per_generated_token": ["gauge", "Bytes read from disk per generated id, since the server started"],
  "k3:expert_cache_retention_ratio": ["gauge", "Share of routed-expert requests served by experts already in RAM, since the server started"],
  "process_resident_memory_bytes": ["gauge", "Resident set size of the server process"],
} as const satisfies Record<string, readonly ["counter" | "gauge" | "histogram", string]>;

export type MetricName = keyof typeof metricHelp;

/** Latency buckets in seconds: from a demo model's milliseconds to the released model's minutes. */
const bucketsSeconds = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

type Labels = Readonly<Record<string, string>>;

const labelText = (labels: Labels) => {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  const escape = (v: string) => v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
  return `{${entries.map(([k, v]) => `${k}="${escape(v)}"`).join(",")}}`;
};

const number = (x: number) => (Number.isFinite(x) ? String(x) : x > 0 ? "+Inf" : x < 0 ? "-Inf" : "NaN");

class Histogram {
  readonly counts = new Array<number>(bucketsSeconds.length).fill(0);
  sum = 0;
  count = 0;

  observe(seconds: number): void {
    if (!Number.isFinite(seconds) || seconds < 0) return;
    this.sum += seconds;
    this.count++;
    bucketsSeconds.forEach((le, i) => {
      if (seconds <= le) this.counts[i]!++;
    });
  }
}

export class ServerMetrics {
  readonly #counters = new Map<MetricName, Map<string, { labels: Labels; value: number }>>();
  readonly #histograms = new Map<MetricName, Histogram>();

  add(name: MetricName, by: number, labels: Labels = {}): void {
    const key = labelText(labels);
    let series = this.#counters.get(name);
    if (!series) this.#counters.set(name, (series = new Map()));
    const entry = series.get(key);
    if (entry) entry.value += by;
    else series.set(key, { labels, value: by });
  }

  observe(name: MetricName, seconds: number): void {
    let h = this.#histograms.get(name);
    if (!h) this.#histograms.set(name, (h = new Histogram()));
    h.observe(seconds);
  }

  /** The text a scrape gets; `gauges` are read now. */
  render(gauges: Partial<Record<MetricName, number>>): string {
    const out: string[] = [];
    for (const [name, [type, help]] of Object.entries(metricHelp) as [MetricName, readonly [string, string]][]) {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      if (type === "histogram") {
        const h = this.#histograms.get(name) ?? new Histogram();
        bucketsSeconds.forEach((le, i) => out.push(`${name}_bucket{le="${le}"} ${h.counts[i]}`));
        out.push(`${name}_bucket{le="+Inf"} ${h.count}`, `${name}_sum ${number(h.sum)}`, `${name}_count ${h.count}`);
      } else if (type === "gauge" || gauges[name] !== undefined) {
        out.push(`${name} ${number(gauges[name] ?? 0)}`);
      } else {
        const series = this.#counters.get(name);
        if (!series || series.size === 0) out.push(`${name} 0`);
        else for (const { labels, value } of series.values()) out.push(`${name}${labelText(labels)} ${number(value)}`);
      }
    }
    return `${out.join("\n")}\n`;
  }
}

/** The endpoint label of a path: the API routes by name, anything else as "other". */
export function endpointOf(path: string): string {
  const known: Record<string, string> = {
    "/v1/chat/completions": "chat_completions", "/v1/completions": "completions", "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens", "/v1/responses": "responses", "/v1/models": "models", "/health": "health", "/metrics": "metrics",
  };
  return known[path] ?? (path.startsWith("/v1/models/") ? "models" : "other");
}
