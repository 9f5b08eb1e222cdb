package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each distinct warning of the API server is printed once, as one plain
// line; anything that is not a warning (code 299) is not.
func TestWarningPrinter(t *testing.T) {
	type header struct {
		code int
		text string
	}
	tests := []struct {
		name    string
		headers []header
		want    string
	}{
		// The gate's warnings come back on the writes of resume, undo and
		// apply: they are the gate's, said so, not the command's.
		{name: "one warning of the gate", headers: []header{{299, "rollplan: will update 6 pods in 3 waves: 6 recreated"}},
			want: "warning: from admission webhook rollplan gate: will update 6 pods in 3 waves: 6 recreated\n"},
		{name: "the gate's would-deny", headers: []header{{299, "rollplan gate: would be denied in deny mode: budget used up"}},
			want: "warning: from admission webhook rollplan gate: would be denied in deny mode: budget used up\n"},
		{name: "the same warning on every write: once",
			headers: []header{{299, "apps/v1beta1 is deprecated"}, {299, "apps/v1beta1 is deprecated"}, {299, "rollplan: will update 2 pods"}, {299, "apps/v1beta1 is deprecated"}},
			want:    "warning: apps/v1beta1 is deprecated\nwarning: from admission webhook rollplan gate: will update 2 pods\n"},
		{name: "a warning over several lines is one line", headers: []header{{299, "first\n  second"}},
			want: "warning: first second\n"},
		{name: "not code 299, or empty: nothing", headers: []header{{199, "misc"}, {299, "  "}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &warningPrinter{out: &out}
			for _, h := range tt.headers {
				p.HandleWarningHeader(h.code, "-", h.text)
			}
			if out.String() != tt.want {
				t.Errorf("printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// A client connectKubeconfig makes prints the API server's Warning headers
// through kubeWarnings (client-go's default would log them through klog).
func TestConnectKubeconfigWarnings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "rollplan: will update 6 pods in 3 waves: 6 recreated"`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {token: t}}]
contexts: [{name: test, context: {cluster: test, user: test, namespace: prod}}]
current-context: test
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var k kubeFlags
	fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
	k.register(fl)
	if err := fl.Parse([]string{"--kubeconfig", kubeconfig}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	defer kubeWarnings.redirect(&out)()
	cl, err := connectKubeconfig(&k)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cl.client.CoreV1().Pods(cl.namespace).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if want := "warning: from admission webhook rollplan gate: will update 6 pods in 3 waves: 6 recreated\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}
