package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/gate/certs"
)

// gateManifestsNow is the time certificates start from; tests fix it.
var gateManifestsNow = time.Now

func newGateManifestsCommand() *cobra.Command {
	var (
		namespace string
		image     string
		validFor  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "manifests [--namespace rollplan-system] [--image rollplan:latest] [--valid-for 8760h]",
		Short: "Print the gate's install manifests, with a new CA and serving certificate",
		Long: `Print everything the gate needs, as one YAML stream for kubectl: its
namespace, service account and RBAC, Deployment, Service, PodDisruptionBudget,
the ValidatingWebhookConfiguration, and a kubernetes.io/tls Secret
rollplan-gate-tls holding a serving certificate for the gate's Service,
signed by a CA generated on the spot; the webhooks trust that CA (caBundle).
The CA's key is not kept anywhere.

For a quick install:

  rollplan gate manifests | kubectl apply -f -

The pods webhook fails closed: until a gate replica is ready, deletions and
evictions of pods owned by a workload are refused (outside kube-system and
the gate's namespace). Wait for it with
  kubectl -n rollplan-system rollout status deploy/rollplan-gate

Every run makes a new CA, so running it again and applying renews the
certificate (the gate's pods roll over to it); do that before --valid-for
runs out.

For production, install the kustomize base in deploy/ instead and let
cert-manager issue and renew the certificate: a Certificate writing the
Secret rollplan-gate-tls for rollplan-gate.rollplan-system.svc, and the
annotation
  cert-manager.io/inject-ca-from: rollplan-system/rollplan-gate-tls
on the ValidatingWebhookConfiguration rollplan-gate, so that cert-manager
fills in its caBundle.`,
		Example: `  rollplan gate manifests | kubectl apply -f -
  rollplan gate manifests --namespace gate --image registry.example/rollplan:v1.4.0 > gate.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
				return usageError{fmt.Errorf("--namespace %q: %v", namespace, errs)}
			}
			if image == "" {
				return usageError{fmt.Errorf("--image: empty")}
			}
			if validFor <= 0 {
				return usageError{fmt.Errorf("--valid-for %s: want a positive duration, e.g. 8760h", validFor)}
			}
			now := gateManifestsNow()
			ca, cert, key, err := certs.Generate(deploy.ServiceName, namespace, validFor, now)
			if err != nil {
				return fmt.Errorf("generate the gate's certificates: %w", err)
			}
			out, err := deploy.Render(deploy.Options{Namespace: namespace, Image: image, CABundle: ca, ServingCert: cert, ServingKey: key})
			if err != nil {
				return fmt.Errorf("render the gate's manifests: %w", err)
			}
			w := cmd.OutOrStdout()
			if _, err := fmt.Fprintf(w, "# rollplan gate manifests (rollplan %s): the CA and serving certificate expire %s.\n", version, now.Add(validFor).UTC().Format(time.RFC3339)); err != nil {
				return fmt.Errorf("write the manifests: %w", err)
			}
			if _, err := w.Write(out); err != nil {
				return fmt.Errorf("write the manifests: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", deploy.DefaultNamespace, "namespace to install the gate in")
	f.StringVar(&image, "image", deploy.DefaultImage, "gate container image")
	f.DurationVar(&validFor, "valid-for", 365*24*time.Hour, "how long the CA and serving certificate are valid")
	return cmd
}
