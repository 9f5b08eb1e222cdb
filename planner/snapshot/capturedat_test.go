package snapshot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCapturedAt(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, creationTimestamp: \"2026-03-01T12:00:00Z\"}\n"
	list := func(ann string) string {
		return "apiVersion: v1\nkind: List\nmetadata: {annotations: {" + ann + "}}\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: default, creationTimestamp: \"2026-03-01T12:00:00Z\"}\n"
	}
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	cases := []struct {
		name       string
		in         string
		capturedAt string // "" for none
		latest     string
		wantErr    []string
	}{
		{name: "no annotation: the newest object", in: list(`other: x`), latest: "2026-03-01T12:00:00Z"},
		{name: "the capture time when later", in: list(AnnCapturedAt + `: "2026-03-01T12:05:00Z"`), capturedAt: "2026-03-01T12:05:00Z", latest: "2026-03-01T12:05:00Z"},
		{name: "an offset is read as UTC", in: list(AnnCapturedAt + `: "2026-03-01T13:05:00+01:00"`), capturedAt: "2026-03-01T12:05:00Z", latest: "2026-03-01T12:05:00Z"},
		{name: "never before the newest object", in: list(AnnCapturedAt + `: "2026-03-01T11:00:00Z"`), capturedAt: "2026-03-01T11:00:00Z", latest: "2026-03-01T12:00:00Z"},
		{name: "of several Lists the latest", in: list(AnnCapturedAt+`: "2026-03-01T12:05:00Z"`) + "---\n" + strings.Replace(list(AnnCapturedAt+`: "2026-03-01T12:07:00Z"`), "name: p,", "name: q,", 1), capturedAt: "2026-03-01T12:07:00Z", latest: "2026-03-01T12:07:00Z"},
		{name: "only on Lists", in: strings.Replace(pod, "metadata: {", "metadata: {annotations: {"+AnnCapturedAt+": \"2026-03-01T12:05:00Z\"}, ", 1), latest: "2026-03-01T12:00:00Z"},
		{name: "List metadata of another shape is read as before", in: "apiVersion: v1\nkind: List\nmetadata: {annotations: 3}\nitems: []\n---\n" + pod, latest: "2026-03-01T12:00:00Z"},
		{name: "not a time", in: list(AnnCapturedAt + `: "yesterday"`), wantErr: []string{"document 1", "metadata.annotations[" + AnnCapturedAt + "]", `"yesterday"`, "RFC 3339"}},
		{name: "not a string", in: list(AnnCapturedAt + `: 5`), wantErr: []string{"metadata.annotations[" + AnnCapturedAt + "]", "5 is not"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, err := Decode("snap.yaml", []byte(c.in))
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("want an error")
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.capturedAt == "" && !s.CapturedAt.IsZero() || c.capturedAt != "" && !s.CapturedAt.Equal(at(c.capturedAt)) {
				t.Errorf("CapturedAt %v, want %q", s.CapturedAt, c.capturedAt)
			}
			if got := s.Latest(); !got.Equal(at(c.latest)) {
				t.Errorf("Latest %v, want %s", got, c.latest)
			}
		})
	}
}

// A snapshot without a capture time keeps the digest it had before the
// field existed (the golden plans' snapshotDigest checks it too); with
// one, the time is part of the digest.
func TestCapturedAtDigest(t *testing.T) {
	objs := "apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n"
	plain, _, err := Decode("a.yaml", []byte(objs))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "CapturedAt") {
		t.Errorf("a snapshot without a capture time digests one: %s", b)
	}
	captured, _, err := Decode("b.yaml", []byte(strings.Replace(objs, "metadata: {}", "metadata: {annotations: {"+AnnCapturedAt+": \"2026-03-01T12:00:00Z\"}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := plain.Digest()
	if d2, _ := captured.Digest(); d2 == d1 {
		t.Error("the capture time is not part of the digest")
	}
}
