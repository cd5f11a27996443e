// The registry's Prometheus text parser ships no types: the shape its README documents, as the tests read it.
declare module "parse-prometheus-text-format" {
  interface PrometheusMetric {
    value?: string;
    labels?: Record<string, string>;
    count?: string;
    sum?: string;
    buckets?: Record<string, string>;
  }
  interface PrometheusFamily {
    name: string;
    help: string;
    type: string;
    metrics: PrometheusMetric[];
  }
  export default function parsePrometheusTextFormat(text: string): PrometheusFamily[];
}
