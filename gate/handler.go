package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// maxReview bounds a request body: the API server's own limit for an
// object is 3 MiB; a review holds two of them.
const maxReview = 7 << 20

// ServeHTTP answers an admission.k8s.io/v1 AdmissionReview (POST, JSON)
// and writes one decision log line per request.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, fmt.Sprintf("read AdmissionReview: body unreadable or over %d bytes", maxReview), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decode AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := review.Request
	if req == nil {
		http.Error(w, "AdmissionReview without request", http.StatusBadRequest)
		return
	}
	resp, decision, v := g.Review(r.Context(), req)
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	raw, err := json.Marshal(out)
	if err != nil {
		http.Error(w, "encode AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)

	op := req.Resource.Resource
	if req.SubResource != "" {
		op += "/" + req.SubResource
	}
	op += " " + string(req.Operation)
	took := time.Since(start)
	if m := g.opts.Metrics; m != nil {
		m.Requests.WithLabelValues(op, decision).Inc()
		m.Duration.WithLabelValues(op, decision).Observe(took.Seconds())
	}
	// Milliseconds, from the time the metric observes: a JSON log's
	// time.Duration is integer nanoseconds, which no one reads.
	ms := float64(took.Microseconds()) / 1000
	attrs := []any{"uid", req.UID, "operation", op, "namespace", req.Namespace, "name", req.Name,
		"user", req.UserInfo.Username, "decision", decision, "reason", v.text(), "durationMs", ms}
	if v.workload != "" {
		attrs = append(attrs, "workload", v.workload, "enforcement", v.mode)
	}
	if v.dryRun {
		attrs = append(attrs, "dryRun", true)
	}
	g.opts.Log.Info("admission", attrs...)
}
