// Package analysis takes the measurements a rollout policy declares
// between waves: named queries over a workload's wave of pods, answered by
// Prometheus or by a web endpoint returning JSON. It knows nothing of
// policies, plans or how a rollout is carried out; its results become
// facts (analysis) that a policy judges.
//
// # Measurements and targets
//
// A Measurement names a provider, a query template, how many times to take
// it (Count) and how far apart (Interval). Templates have one renderer in
// rollplan, engine.RenderTemplate: the plan renders every gate's queries
// with it (engine.RenderQuery) and the executor hands them over with
// Rendered set, sent as they are, so what the plan shows is what runs.
// Without Rendered (embedding this package alone), Query is rendered by
// the same code over the Target:
//
//	{{.Namespace}} {{.Name}} {{.Kind}} {{.Revision}} {{.Wave}} {{.Pods}}
//	{{.PodRegex}}  the wave's pod names, each regexp-quoted, joined by |
//	{{.Window}}    the measurement's Window as a PromQL duration (5m)
//	{{.Interval}}  its Interval, likewise
//
// Every string is escaped for where the provider puts it: for Prometheus
// the inside of a double-quoted PromQL string, so
// sum(rate(http_errors_total{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"}[{{.Window}}]))
// matches exactly the wave's pods; for the web provider a URL query value
// (and a JSON string in a POST body). A template naming an unknown field
// fails Validate and rendering with the field and the fields there are;
// {{.PodRegex}} over a wave without pods and {{.Window}} without a window
// fail rendering, naming the field. range, define and template are refused
// and printf widths bounded, so no template can stall the rollout that
// renders it.
//
// # Providers
//
// Prometheus (NewPrometheus) evaluates PromQL over the HTTP API
// (/api/v1/query at the measurement's time; with an Aggregation,
// /api/v1/query_range over [now-Window, now] at Step, the one series'
// points reduced by avg, max, min or last). The answer must be a scalar
// or exactly one series: none (the pods have not been scraped yet) or
// several (the query forgot a sum) is an error, as is NaN or an infinity
// (a ratio over no traffic), so a broken query is never read as a number.
//
// Web (NewWeb) requests the rendered URL (GET, or POST with a rendered
// body) and picks one JSON number out of the response with a kubectl-style
// JSONPath ({.data.errorRate}). A non-2xx status, a body that is not JSON,
// a path that matches nothing or several values, or a value that is not a
// number (a numeric string included) is an error.
//
// Both take HTTPOptions as Prometheus's own scrape configs do: a bearer
// token inline or from a file read again per request, basic auth, TLS (CA
// file, client certificate and key, server name, insecureSkipVerify),
// custom headers and a timeout per request.
//
// # Results and errors
//
// A Result has a value or an error, never both. Its Error starts with the
// measurement's name and says where and what was asked, then why:
//
//	measurement "errors": prometheus http://prom:9090: query sum(rate(x[5m])): 0 series, want exactly one
//	measurement "errors": prometheus http://prom:9090: query x{pod=~"web-0|web-1"}: 2 series ({...pod="web-0"}, {...pod="web-1"}), want exactly one
//	measurement "errors": prometheus http://prom:9090: query sum(rate(x[5m]): bad_data: invalid parameter "query": 1:19: parse error: unclosed left parenthesis
//	measurement "errors": prometheus http://prom:9090: query sum(x) / 0: value +Inf, want a finite number (a ratio over no samples?)
//	measurement "errors": prometheus http://prom:9090: query up: Post "http://prom:9090/api/v1/query": dial tcp 10.0.0.9:9090: connect: connection refused
//	measurement "errors": prometheus http://prom:9090: query up: timed out after 30s: Post "...": net/http: request canceled (Client.Timeout exceeded while awaiting headers)
//	measurement "p99": GET https://svc/api?ns=default: jsonpath {.p99}: the string "n/a", want a number
//	measurement "p99": GET https://svc/api?ns=default: HTTP 503 Service Unavailable: {"error":"warming up"}
//
// A provider takes one value per call; the executor takes a measurement's
// Count values Interval apart, one per step (executor.AnalysisState), so
// no worker waits an interval out. An unreachable server yields error
// results, never values.
package analysis
