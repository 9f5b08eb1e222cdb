package gate

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzServeHTTP sends mutated AdmissionReviews to the gate's handler. The
// API server sends whatever its clients wrote, so whatever the body, the
// gate must answer without panicking: 400 for a body that is not a
// review, otherwise 200 with a review whose response echoes the request's
// uid and says allowed or why not.
//
//	go test ./gate -run '^$' -fuzz FuzzServeHTTP -fuzztime 5m -fuzzminimizetime 0
func FuzzServeHTTP(f *testing.F) {
	objs := statefulSet(3, "db-2")
	fx := newFixture(f, Options{Log: slog.New(slog.DiscardHandler)}, objs...)
	set := objs[0].(*appsv1.StatefulSet)
	review := func(req *admissionv1.AdmissionRequest) []byte {
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	raw := func(v any) runtime.RawExtension {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	pod := func(name string) *corev1.Pod {
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok && p.Name == name {
				return p
			}
		}
		f.Fatalf("fixture has no pod %s", name)
		return nil
	}
	resized := pod("db-1").DeepCopy()
	resized.Spec.Containers[0].Image = "example.com/db:v2"
	updated := set.DeepCopy()
	updated.Spec.Template.Spec.Containers[0].Image = "example.com/db:v2"
	sts := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	f.Add(review(evict("db-0", true)))
	f.Add(review(evict("db-2", false)))
	f.Add(review(&admissionv1.AdmissionRequest{UID: "del", Namespace: ns, Name: "db-1", Resource: podResource(),
		Operation: admissionv1.Delete, OldObject: raw(pod("db-1"))}))
	f.Add(review(&admissionv1.AdmissionRequest{UID: "img", Namespace: ns, Name: "db-1", Resource: podResource(),
		Operation: admissionv1.Update, Object: raw(resized), OldObject: raw(pod("db-1"))}))
	f.Add(review(&admissionv1.AdmissionRequest{UID: "sts", Namespace: ns, Name: "db", Resource: sts,
		Operation: admissionv1.Update, Object: raw(updated), OldObject: raw(set)}))
	f.Add(review(&admissionv1.AdmissionRequest{UID: "new", Namespace: ns, Name: "db", Resource: sts,
		Operation: admissionv1.Create, Object: raw(updated)}))
	f.Add([]byte(`{"request":{"uid":"x","resource":{"resource":"pods"},"subResource":"eviction","operation":"CREATE"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		fx.gate.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(string(body))))
		var in admissionv1.AdmissionReview
		if json.Unmarshal(body, &in) != nil || in.Request == nil {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("a body that is not a review: status %d, want 400 (%s)", w.Code, w.Body)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("status %d for a decodable review: %s", w.Code, w.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is not a review with a response (%v): %s", err, w.Body)
		}
		if out.Response.UID != in.Request.UID {
			t.Fatalf("response uid %q, request uid %q", out.Response.UID, in.Request.UID)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Fatalf("denied without a message: %s", w.Body)
		}
	})
}
