package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

// registerCluster binds --kubernetes-version and --feature-gates: which
// version's controllers the plan predicts, and the gates that differ from
// that version's defaults.
func (f *planFlags) registerCluster(fl *pflag.FlagSet) {
	fl.StringVar(&f.kubernetesVersion, "kubernetes-version", "", "Kubernetes version whose controllers the plan predicts: "+kubeversion.SupportedList()+" (a patch such as v1.37.2 is accepted); default: the API server's version for a live cluster, else the version the snapshot records, else "+kubeversion.Newest.String())
	fl.StringVar(&f.featureGates, "feature-gates", "", "feature gates that differ from the Kubernetes version's defaults, as kube-controller-manager takes them, e.g. MaxUnavailableStatefulSet=false,StatefulSetRecreateStrategy=true")
}

// checkCluster validates both flags before anything is read: a usage
// error names the flag. The gates are checked against the flag's version,
// or again against the version the cluster or snapshot turns out to be.
func (f *planFlags) checkCluster() error {
	v := kubeversion.Newest
	if f.kubernetesVersion != "" {
		var err error
		if v, err = kubeversion.Parse(f.kubernetesVersion); err != nil {
			return usageError{fmt.Errorf("--kubernetes-version %w", err)}
		}
	}
	if _, err := kubeversion.ParseGates(v, f.featureGates); err != nil {
		return usageError{fmt.Errorf("--feature-gates %w", err)}
	}
	return nil
}

// clusterOptions resolves the version (the flag, else recorded, which
// source names, else the newest, with a note on stderr saying so) and the
// gates, as the facts take them.
func (f *planFlags) clusterOptions(recorded, source string, stderr io.Writer) (facts.Options, error) {
	v, note, err := kubeversion.Resolve(f.kubernetesVersion, recorded, source)
	if err != nil {
		return facts.Options{}, usageError{fmt.Errorf("--kubernetes-version %w", err)}
	}
	if note != "" && stderr != nil {
		fmt.Fprintf(stderr, "note: %s\n", note)
	}
	gates, err := kubeversion.ParseGates(v, f.featureGates)
	if err != nil {
		return facts.Options{}, usageError{fmt.Errorf("--feature-gates %w", err)}
	}
	return facts.Options{KubernetesVersion: v, FeatureGates: gates}, nil
}

// liveClusterOptions is clusterOptions for a live cluster: the version
// discovery reports, unless --kubernetes-version names one. A server that
// cannot be reached is that error alone, not a server without a version:
// nothing else would work either.
func (f *planFlags) liveClusterOptions(cl *cluster, stderr io.Writer) (facts.Options, error) {
	recorded := ""
	if f.kubernetesVersion == "" {
		info, err := cl.client.Discovery().ServerVersion()
		var status apierrors.APIStatus
		switch {
		case err == nil:
			recorded = info.GitVersion
		case errors.As(err, &status):
			// It answered, without a version (a proxy, RBAC on /version).
			fmt.Fprintf(stderr, "warning: reading the API server's version (%s): %v\n", cl.source, err)
		default:
			return facts.Options{}, fmt.Errorf("cannot reach the API server (%s): %w: check that the cluster is up and that --kubeconfig and --context name it", cl.source, err)
		}
	}
	return f.clusterOptions(recorded, "the API server", stderr)
}
