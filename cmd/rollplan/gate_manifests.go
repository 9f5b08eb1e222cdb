package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rollplan/rollplan/analysis"
	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/gate/certs"
	"github.com/rollplan/rollplan/planner/engine"
)

// manifestsNow is the time certificates start from; tests fix it.
var manifestsNow = time.Now

// maxPolicyBytes is what a ConfigMap holds at most (1 MiB).
const maxPolicyBytes = 1 << 20

// policyConfigMapFiles reads the files the engine of kind loads from paths (a
// file named is taken as it is; a directory gives its .rego files for rego,
// its RolloutPolicy YAML for cel, tests left out), keyed by their path
// below the directory with "/" as "_": the ConfigMap keys.
func policyConfigMapFiles(kind string, paths []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	from := map[string]string{}
	total := 0
	add := func(key, file string) error {
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return fmt.Errorf("policy %s: the file name %q cannot be a ConfigMap key (%s): rename the file", file, key, strings.Join(errs, "; "))
		}
		if prev, dup := from[key]; dup {
			return fmt.Errorf("policy %s: it and %s would both be the ConfigMap key %q: rename one", file, prev, key)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("policy %s: %w", file, err)
		}
		if total += len(b); total > maxPolicyBytes {
			return fmt.Errorf("policy %s: the policy files exceed the 1 MiB a ConfigMap holds: mount them into the gate and the controller yourself (see deploy/gate-deployment.yaml)", strings.Join(paths, ", "))
		}
		out[key], from[key] = b, file
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
		if !st.IsDir() {
			if err := add(filepath.Base(p), p); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !engine.IsPolicyFile(kind, path) {
				return nil
			}
			rel, err := filepath.Rel(p, path)
			if err != nil {
				return err
			}
			return add(strings.ReplaceAll(filepath.ToSlash(rel), "/", "_"), path)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newManifestsCommand is `rollplan manifests`: everything a cluster needs,
// the gate and the controller.
func newManifestsCommand() *cobra.Command {
	return manifestsCommand(false)
}

// newGateManifestsCommand is `rollplan gate manifests`: the gate alone,
// with the objects it shares (namespace, policy ConfigMap), as it printed
// before the controller existed, so that scripts and installs built on it
// get what they got.
func newGateManifestsCommand() *cobra.Command {
	return manifestsCommand(true)
}

// manifestsPolicyHelp is the --policy paragraph of both commands' help;
// who mount(s) the ConfigMap.
func manifestsPolicyHelp(who, s string) string {
	return `With --policy, the policy files (those the engine loads: .rego files but
*_test.rego for Rego, RolloutPolicy YAML but *_test.yaml for CEL) are
compiled, then written into a ConfigMap ` + deploy.PolicyConfigMapName + ` that
` + who + ` mount` + s + ` at ` + deploy.PolicyMountPath + `,
with one --policy flag per file; the policy is reloaded when the
ConfigMap changes (kubectl apply of new manifests, or kubectl edit),
without a restart.`
}

const manifestsCertHelp = `Every run makes a new CA, so running it again and applying renews the
certificate (the gate's pods roll over to it); do that before --valid-for
runs out.

For production, install the kustomize base in deploy/ instead and let
cert-manager issue and renew the certificate: a Certificate writing the
Secret rollplan-gate-tls for rollplan-gate.rollplan-system.svc, and the
annotation
  cert-manager.io/inject-ca-from: rollplan-system/rollplan-gate-tls
on the ValidatingWebhookConfiguration rollplan-gate, so that cert-manager
fills in its caBundle.`

func manifestsCommand(gateOnly bool) *cobra.Command {
	var (
		namespace          string
		image              string
		validFor           time.Duration
		pf                 planFlags
		controllerReplicas int32
		controllerDryRun   bool
		analysisConfig     string
	)
	name := "rollplan manifests"
	cmd := &cobra.Command{
		Use:   "manifests [--namespace rollplan-system] [--image rollplan:latest] [--valid-for 8760h] [--policy P] [--controller-replicas 2] [--analysis-config FILE]",
		Short: "Print everything rollplan needs in a cluster: the controller and the gate, with a new CA and serving certificate",
		Long: `Print everything rollplan needs in a cluster, as one YAML stream for
kubectl: the namespace (enforcing the restricted Pod Security profile),
and for each of the controller and the gate its ServiceAccount and
least-privilege RBAC, Deployment, Service and PodDisruptionBudget; the
gate's ValidatingWebhookConfiguration and a kubernetes.io/tls Secret
rollplan-gate-tls holding a serving certificate for the gate's Service,
signed by a CA generated on the spot; the webhooks trust that CA
(caBundle). The CA's key is not kept anywhere.

The controller (rollplan controller) runs --controller-replicas replicas
(2) with leader election: one drives every managed rollout, the others
stand by. With --controller-dry-run it plans and reports every action and
writes nothing. The gate runs 2 replicas spread over zones.

The controller reads the measurement providers of the policies' analysis
gates from the ConfigMap ` + deploy.AnalysisConfigMapName + ` (key ` + deploy.AnalysisConfigKey + `), which it
mounts optionally at ` + deploy.AnalysisMountPath + `: without it, it runs with
none (a gate is inconclusive, never passed). --analysis-config FILE
writes FILE into that ConfigMap, with a checksum on the controller's pod
template: the controller reads it at start, so a new one rolls it out.

` + manifestsPolicyHelp("the controller and the gate", "") + `

For a quick install:

  rollplan manifests | kubectl apply -f -

The pods webhook fails closed: until a gate replica is ready, deletions and
evictions of pods owned by a workload are refused (outside kube-system and
the gate's namespace). Wait for it with
  kubectl -n rollplan-system rollout status deploy/rollplan-gate

To take it out again, delete the webhook configuration first (it fails
closed), then the rest:
  kubectl delete validatingwebhookconfiguration rollplan-gate
  rollplan manifests | kubectl delete --ignore-not-found -f -

` + manifestsCertHelp,
		Example: `  rollplan manifests | kubectl apply -f -
  rollplan manifests --namespace rollplan --image registry.example/rollplan:v1.4.0 > rollplan.yaml
  rollplan manifests --image registry.example/rollplan:v1 --policy policies/examples/guard-critical | kubectl apply -f -
  rollplan manifests --image registry.example/rollplan:v1 --controller-dry-run | kubectl apply -f -`,
		Args: noArgs,
	}
	if gateOnly {
		name = "rollplan gate manifests"
		cmd.Use = "manifests [--namespace rollplan-system] [--image rollplan:latest] [--valid-for 8760h] [--policy P]"
		cmd.Short = "Print the gate's install manifests, with a new CA and serving certificate"
		cmd.Long = `Print everything the gate needs, as one YAML stream for kubectl: its
namespace, service account and RBAC, Deployment, Service, PodDisruptionBudget,
the ValidatingWebhookConfiguration, and a kubernetes.io/tls Secret
rollplan-gate-tls holding a serving certificate for the gate's Service,
signed by a CA generated on the spot; the webhooks trust that CA (caBundle).
The CA's key is not kept anywhere. This is the gate's part of 'rollplan
manifests', which prints the controller too.

` + manifestsPolicyHelp("the gate", "s") + `

For a quick install:

  rollplan gate manifests | kubectl apply -f -

The pods webhook fails closed: until a gate replica is ready, deletions and
evictions of pods owned by a workload are refused (outside kube-system and
the gate's namespace). Wait for it with
  kubectl -n rollplan-system rollout status deploy/rollplan-gate

` + manifestsCertHelp
		cmd.Example = `  rollplan gate manifests | kubectl apply -f -
  rollplan gate manifests --namespace gate --image registry.example/rollplan:v1.4.0 > gate.yaml
  rollplan gate manifests --image registry.example/rollplan:v1 --policy policies/examples/guard-critical | kubectl apply -f -`
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return usageError{fmt.Errorf("--namespace %q: %v", namespace, errs)}
		}
		if image == "" {
			return usageError{fmt.Errorf("--image: empty")}
		}
		opts := deploy.Options{Namespace: namespace, Image: image}
		if gateOnly {
			opts.Components = []deploy.Component{deploy.Gate}
		} else {
			if controllerReplicas < 1 {
				return usageError{fmt.Errorf("--controller-replicas %d: want at least 1 (2 or more for a standby that takes over); for no controller, use rollplan gate manifests", controllerReplicas)}
			}
			opts.ControllerReplicas, opts.ControllerDryRun = controllerReplicas, controllerDryRun
			if analysisConfig != "" {
				b, err := os.ReadFile(analysisConfig)
				if err != nil {
					return fmt.Errorf("--analysis-config: %w", err)
				}
				// Parsed, not built: the files it names are the pod's.
				if _, err := analysis.ParseConfig("--analysis-config "+analysisConfig, b); err != nil {
					return usageError{err}
				}
				opts.AnalysisConfig = b
			}
		}
		if len(pf.policies) > 0 || pf.engine != "" {
			kind, err := pf.engineKind()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			// Compile it here: a policy the gate cannot load would
			// leave it crash-looping with the pods webhook failing
			// closed.
			if _, err := newEngine(ctx, kind, pf.policies, time.Minute); err != nil {
				return err
			}
			if opts.Policy, err = policyConfigMapFiles(kind, pf.policies); err != nil {
				return err
			}
			opts.Engine = kind
		}
		now := manifestsNow()
		ca, cert, key, err := certs.Generate(deploy.ServiceName, namespace, validFor, now)
		if err != nil {
			return fmt.Errorf("generate the gate's certificates: %w", err)
		}
		opts.CABundle, opts.ServingCert, opts.ServingKey = ca, cert, key
		out, err := deploy.Render(opts)
		if err != nil {
			return fmt.Errorf("render the manifests: %w", err)
		}
		w := cmd.OutOrStdout()
		if _, err := fmt.Fprintf(w, "# %s (rollplan %s): the CA and serving certificate expire %s.\n", name, version, now.Add(validFor).UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("write the manifests: %w", err)
		}
		if _, err := w.Write(out); err != nil {
			return fmt.Errorf("write the manifests: %w", err)
		}
		return nil
	}
	f := cmd.Flags()
	who := "the gate and the controller"
	if gateOnly {
		who = "the gate"
	}
	f.StringVarP(&namespace, "namespace", "n", deploy.DefaultNamespace, "namespace to install "+who+" in")
	f.StringVar(&image, "image", deploy.DefaultImage, "container image of "+who+" (its entrypoint: the rollplan binary)")
	f.StringSliceVar(&pf.policies, "policy", nil, "policy files or directories for "+who+", as rollplan gate --policy takes them; written into the ConfigMap "+deploy.PolicyConfigMapName+"; default: the built-in strategy")
	f.StringVar(&pf.engine, "engine", "", "the policy engine of "+who+": "+engine.KindList()+"; "+engineDefault)
	durationVar(f, &validFor, "valid-for", 365*24*time.Hour, positiveSeconds, "how long the CA and serving certificate are valid")
	if !gateOnly {
		f.Int32Var(&controllerReplicas, "controller-replicas", 2, "replicas of the controller; one leads (leader election), the others stand by")
		f.BoolVar(&controllerDryRun, "controller-dry-run", false, "run the controller with --dry-run: it plans and reports every action (log, metrics) and writes nothing")
		f.StringVar(&analysisConfig, "analysis-config", "", "the controller's measurement providers (rollplan controller --analysis-config), written into the ConfigMap "+deploy.AnalysisConfigMapName+"; default: none")
	}
	return cmd
}
