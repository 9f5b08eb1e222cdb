package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// cluster is what rollplan snapshot reads through.
type cluster struct {
	client kubernetes.Interface
	// dynamic reaches rollplan's own resources (Rollouts); nil in tests
	// that fake only the clientset.
	dynamic dynamic.Interface
	// namespace: -n, else the kubeconfig context's, else "default".
	namespace string
	// source names the cluster in the summary: `context "kind-dev"`.
	source string
}

// Tests replace these with a fake clientset and a fixed clock.
var (
	connectCluster = connectKubeconfig
	captureClock   = time.Now
)

// kubeFlags are kubectl's connection flags (--kubeconfig, --context,
// -n/--namespace, --cluster, --user, --server, --token, --as, ...), bound
// as k8s.io/cli-runtime's ConfigFlags binds them.
type kubeFlags struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	// qps and burst: the client's rate limits (0: rollplan's defaults).
	qps   float32
	burst int
	// wrap, when set, wraps the client's transport (request metrics).
	wrap func(http.RoundTripper) http.RoundTripper
}

func (k *kubeFlags) register(fl *pflag.FlagSet) {
	k.rules = clientcmd.NewDefaultClientConfigLoadingRules()
	k.rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	fl.StringVar(&k.rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	// kubectl no longer offers basic authentication.
	names.AuthOverrideFlags.Username.LongName, names.AuthOverrideFlags.Password.LongName = "", ""
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&k.overrides, fl, names)
	// client-go takes a negative --request-timeout as no timeout at all.
	if f := fl.Lookup(names.Timeout.LongName); f != nil {
		f.Value = requestTimeout{f.Value}
	}
}

// requestTimeout is kubectl's --request-timeout (a string: "30", "30s"),
// refusing what client-go would take silently: a negative duration.
type requestTimeout struct{ pflag.Value }

func (r requestTimeout) Set(s string) error {
	if d, err := clientcmd.ParseTimeout(s); err != nil || d < 0 {
		return usageError{fmt.Errorf("--request-timeout %s: want a duration such as 30s (or seconds, 30), or 0 for no timeout", s)}
	}
	return r.Value.Set(s)
}

// connectKubeconfig opens the cluster the kubeconfig flags name, as kubectl does.
func connectKubeconfig(k *kubeFlags) (*cluster, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.rules, &k.overrides)
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "rollplan/" + version
	rc.QPS, rc.Burst = 20, 50
	if k.qps > 0 {
		rc.QPS, rc.Burst = k.qps, max(k.burst, int(k.qps))
	}
	if k.wrap != nil {
		rc.Wrap(k.wrap)
	}
	// The API server's warnings as plain "warning: ..." lines, each once,
	// not klog lines (see warningPrinter).
	rc.WarningHandler, rc.WarningHandlerWithContext = kubeWarnings, nil
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	source := fmt.Sprintf("server %s", rc.Host)
	if k.overrides.CurrentContext != "" {
		source = fmt.Sprintf("context %q", k.overrides.CurrentContext)
	} else if raw, err := loader.RawConfig(); err == nil && raw.CurrentContext != "" {
		source = fmt.Sprintf("context %q", raw.CurrentContext)
	}
	return &cluster{client: client, dynamic: dyn, namespace: ns, source: source}, nil
}

func newSnapshotCommand() *cobra.Command {
	var (
		config        kubeFlags
		allNamespaces bool
		selector      string
		output        string
		outputFile    string
	)
	cmd := &cobra.Command{
		Use:   "snapshot [KIND/NAME...]",
		Short: "Capture the rollout-relevant objects of a live cluster as a snapshot file",
		Long: `Capture the workloads of a live cluster and everything their rollouts depend
on into one kind: List that rollplan plan -f reads and that can be committed
as a test fixture: the Deployments, StatefulSets and DaemonSets (all of the
namespace, those -l selects, or the KIND/NAME arguments), their ReplicaSets
and ControllerRevisions, their pods, the PodDisruptionBudgets selecting those
pods (with the other pods they select), and the Nodes the pods run on (every
Node when a DaemonSet is captured).

Objects are sorted by kind, namespace and name; managedFields and the
kubectl last-applied-configuration annotation are dropped, and env values
are redacted to "redacted-sha256:" and 12 hex digits of their sha256 (equal
values stay equal, so the plan still sees which env changed; valueFrom
references are kept). Secrets and ConfigMaps are never read. The List's
rollplan.dev/captured-at annotation records the capture time, which
rollplan plan takes as the snapshot time.

KIND is deployment (deploy), statefulset (sts) or daemonset (ds).`,
		Example: `  rollplan snapshot -n prod > snap.yaml && rollplan plan -f snap.yaml
  rollplan snapshot deploy/web sts/db -n prod --output-file testdata/prod-web.yaml
  rollplan snapshot -A -l tier=frontend -o json --context staging`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != capture.FormatYAML && output != capture.FormatJSON {
				return usageError{fmt.Errorf("--output %q: want yaml or json", output)}
			}
			opts := capture.Options{AllNamespaces: allNamespaces, Selector: selector, Now: captureClock}
			for _, a := range args {
				ref, err := capture.ParseRef(a)
				if err != nil {
					return usageError{err}
				}
				opts.Workloads = append(opts.Workloads, ref)
			}
			// Checked before connecting: the namespace is not known yet.
			opts.Namespace = "default"
			if err := opts.Validate(); err != nil {
				return usageError{err}
			}
			if outputFile != "" {
				if err := checkOutputFile(outputFile); err != nil {
					return err
				}
			}
			cl, err := connectCluster(&config)
			if err != nil {
				return err
			}
			opts.Namespace = cl.namespace
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			snap, warnings, err := capture.Capture(ctx, cl.client, opts)
			if err != nil {
				return err
			}
			// The version tells a later plan of this file which
			// controllers to predict.
			if info, err := cl.client.Discovery().ServerVersion(); err != nil {
				warnings = append(warnings, fmt.Sprintf("reading the API server's version: %v: the snapshot records none, so plans of it assume the newest Kubernetes (pass --kubernetes-version to rollplan plan)", err))
			} else {
				snap.KubernetesVersion = info.GitVersion
			}
			data, err := capture.Marshal(snap, output)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			into := ""
			if outputFile == "" {
				if _, err := cmd.OutOrStdout().Write(data); err != nil {
					return err
				}
			} else {
				if err := writeFileAtomic(outputFile, data); err != nil {
					return err
				}
				into = " into " + outputFile
			}
			summary(cmd.ErrOrStderr(), snap, cl.source, into)
			return nil
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, true)
	fl := cmd.Flags()
	fl.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "capture the workloads of every namespace (-n is ignored)")
	fl.StringVarP(&selector, "selector", "l", "", "capture only the workloads this label selector matches (e.g. app=web,tier!=cache)")
	fl.StringVarP(&output, "output", "o", capture.FormatYAML, "output format: yaml or json")
	fl.StringVar(&outputFile, "output-file", "", "write the snapshot to this file instead of stdout (replaced only once the capture succeeded)")
	return cmd
}

// summary is the one line on stderr after a capture.
func summary(w io.Writer, s *snapshot.Snapshot, source, into string) {
	workloads := len(s.Deployments) + len(s.StatefulSets) + len(s.DaemonSets)
	fmt.Fprintf(w, "captured %s, %s, %s, %s from %s%s\n",
		plural.Count(workloads, "workload", "workloads"), plural.Count(len(s.Pods), "pod", "pods"),
		plural.Count(len(s.Nodes), "node", "nodes"), plural.Count(len(s.PDBs), "PDB", "PDBs"), source, into)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path, so that a failed write leaves the previous file whole.
// Errors name path, not the temporary file.
func writeFileAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+strings.TrimPrefix(base, ".")+".tmp-*")
	if err != nil {
		return outputFileError(path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return outputFileError(path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return outputFileError(path, err)
	}
	if err := f.Close(); err != nil {
		return outputFileError(path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return outputFileError(path, err)
	}
	return nil
}
