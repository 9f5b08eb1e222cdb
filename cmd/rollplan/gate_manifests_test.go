package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

func runGateManifests(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := newGateManifestsCommand()
	// As under the root command, which silences both.
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return out.Bytes(), err
}

func decodeManifests(t *testing.T, stream []byte) []runtime.Object {
	t.Helper()
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var content bool
		for line := range strings.Lines(string(doc)) {
			if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
				content = true
			}
		}
		if !content {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("document %d: %v\n%s", len(objs)+1, err, doc)
		}
		objs = append(objs, obj)
	}
}

func TestGateManifests(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	defer func(f func() time.Time) { gateManifestsNow = f }(gateManifestsNow)
	gateManifestsNow = func() time.Time { return now }

	for _, c := range []struct {
		name      string
		args      []string
		namespace string
		image     string
		validFor  time.Duration
	}{
		{"defaults", nil, "rollplan-system", "rollplan:latest", 365 * 24 * time.Hour},
		{"other namespace", []string{"--namespace", "gate", "--image", "registry.example/rollplan:v1", "--valid-for", "720h"}, "gate", "registry.example/rollplan:v1", 720 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runGateManifests(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeManifests(t, out)
			if c.namespace != "rollplan-system" && bytes.Contains(out, []byte("rollplan-system")) {
				t.Errorf("rollplan-system still appears with --namespace %s", c.namespace)
			}

			var (
				secret *corev1.Secret
				vwc    *admissionregistrationv1.ValidatingWebhookConfiguration
			)
			for _, o := range objs {
				m := o.(metav1.Object)
				switch o := o.(type) {
				case *corev1.Namespace:
					if o.Name != c.namespace {
						t.Errorf("Namespace %s, want %s", o.Name, c.namespace)
					}
				case *corev1.Secret:
					secret = o
				case *admissionregistrationv1.ValidatingWebhookConfiguration:
					vwc = o
				case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
				default:
					if m.GetNamespace() != c.namespace {
						t.Errorf("%T %s: namespace %q, want %q", o, m.GetName(), m.GetNamespace(), c.namespace)
					}
				}
				if rb, ok := o.(*rbacv1.ClusterRoleBinding); ok && rb.Subjects[0].Namespace != c.namespace {
					t.Errorf("ClusterRoleBinding subject %v", rb.Subjects[0])
				}
				if rb, ok := o.(*rbacv1.RoleBinding); ok && rb.Subjects[0].Namespace != c.namespace {
					t.Errorf("RoleBinding subject %v", rb.Subjects[0])
				}
			}
			if secret == nil || vwc == nil {
				t.Fatalf("want a Secret and a ValidatingWebhookConfiguration, got %d objects", len(objs))
			}
			if secret.Namespace != c.namespace || secret.Type != corev1.SecretTypeTLS {
				t.Errorf("Secret %s/%s type %s", secret.Namespace, secret.Name, secret.Type)
			}
			if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
				t.Errorf("Secret's key pair: %v", err)
			}

			// The API server calls rollplan-gate.NAMESPACE.svc and trusts
			// the caBundle: the Secret's certificate must verify so.
			for _, wh := range vwc.Webhooks {
				svc := wh.ClientConfig.Service
				if svc.Namespace != c.namespace {
					t.Errorf("%s: service namespace %s", wh.Name, svc.Namespace)
				}
				if !strings.Contains(strings.Join(wh.NamespaceSelector.MatchExpressions[0].Values, ","), c.namespace) {
					t.Errorf("%s: namespaceSelector %v does not exclude %s", wh.Name, wh.NamespaceSelector, c.namespace)
				}
				roots := x509.NewCertPool()
				if !roots.AppendCertsFromPEM(wh.ClientConfig.CABundle) {
					t.Fatalf("%s: caBundle is not PEM: %q", wh.Name, wh.ClientConfig.CABundle)
				}
				leaf, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
				if err != nil {
					t.Fatal(err)
				}
				cert, err := x509.ParseCertificate(leaf.Certificate[0])
				if err != nil {
					t.Fatal(err)
				}
				host := svc.Name + "." + svc.Namespace + ".svc"
				if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
					t.Errorf("%s: serving certificate does not verify for %s against the caBundle: %v", wh.Name, host, err)
				}
				if !cert.NotAfter.Equal(now.Add(c.validFor)) {
					t.Errorf("certificate expires %s, want %s", cert.NotAfter, now.Add(c.validFor))
				}
			}
			if !strings.Contains(string(out), "image: "+c.image+"\n") {
				t.Errorf("image %s not in the manifests", c.image)
			}
		})
	}
}

func TestGateManifestsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--namespace", "Not_A_Namespace"},
		{"--valid-for", "0s"},
		{"--image", ""},
		{"extra"},
	} {
		out, err := runGateManifests(t, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: error %v, want a usage error", args, err)
		}
		if len(out) > 0 {
			t.Errorf("%v: printed %d bytes on error", args, len(out))
		}
	}
}
