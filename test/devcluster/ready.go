package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/rollplan/rollplan/test/kubelet"
	"github.com/rollplan/rollplan/test/prometheus"
)

// tryHeader starts the commands of the ready block; docs/dev-cluster.md
// holds the same lines, and the test runs them from there.
const tryHeader = "Try it, from the repository root in another terminal:"

// try is one numbered step of the ready block: what it shows (comment
// lines) and the commands.
type try struct {
	says     []string
	commands []string
}

// tries are the commands to try next, as printed: kubectl, rollplan and
// dir are the paths to run them with from the working directory.
func (c *cluster) tries() []try {
	kubectl := c.rel(filepath.Join(c.cp.BinDir, "kubectl"))
	rollplan := c.rollplanPath()
	snapshot := c.rel(filepath.Join(c.opts.dir, "snapshot.yaml"))
	ns := c.opts.namespace
	sts := "sts/" + stsName
	image := "$" + registryEnv + "/testapp:2.0"
	says := map[string][]string{
		"set": {
			"Change web's image. rollplan drives web (OnDelete), so no pod moves",
			"yet; the gate answers with the plan: \"Warning: rollplan: will update ...\"",
		},
		"apply": {"Carry it out: in place, 2 pods at a time (max-unavailable 2)"},
	}
	if c.node != nil {
		says["set"] = []string{
			"Change web's image. The gate answers with the plan (\"Warning: rollplan:",
			"will update ...\") and the rollplan controller rolls web by itself, in place",
		}
		says["apply"] = []string{
			"The controller drives web: apply waits until it is done (--wait-for-lease)",
			"and finds nothing left to do",
		}
	}
	return []try{
		{says["set"], []string{fmt.Sprintf("%s -n %s set image %s app=%s", kubectl, ns, sts, image)}},
		{[]string{"Capture what rollplan plans from: workloads, pods, nodes"},
			[]string{fmt.Sprintf("%s snapshot -n %s --output-file %s", rollplan, ns, snapshot)}},
		{[]string{"Preview the rollout, wave by wave (web in place; agent and api rolled out)"},
			[]string{fmt.Sprintf("%s plan -f %s", rollplan, snapshot)}},
		{says["apply"], []string{fmt.Sprintf("%s apply -n %s %s --wait-for-lease", rollplan, ns, sts)}},
		{[]string{"Where it stands; run it in a third terminal during step 4 to watch the waves"},
			[]string{fmt.Sprintf("%s status -n %s %s --watch", rollplan, ns, sts)}},
		{[]string{
			"The gate holds everyone to the same budget: kubectl deletes web-0 and",
			"web-1, and the gate denies web-2 (kubectl exits 1)",
		}, []string{fmt.Sprintf("%s -n %s delete pod %s-0 %s-1 %s-2", kubectl, ns, stsName, stsName, stsName)}},
	}
}

// registryEnv names the images' registry in the printed commands and
// docs/dev-cluster.md: the real node's, or simRegistry.
const registryEnv = "ROLLPLAN_REGISTRY"

// gateCommand is the gate's command line as a shell would take it.
func (c *cluster) gateCommand() string {
	args := append([]string{c.rollplanPath()}, c.gate.Args[1:]...)
	for i, a := range args {
		if a == "" {
			args[i] = `""`
		}
	}
	return strings.Join(args, " ")
}

// rollplanPath is the rollplan binary as the printed commands name it.
func (c *cluster) rollplanPath() string {
	rollplan := c.rel(c.opts.rollplan)
	if !filepath.IsAbs(rollplan) && !strings.HasPrefix(rollplan, ".") {
		rollplan = "./" + rollplan
	}
	return rollplan
}

// printReady prints the ready block: where the cluster is, what runs on
// it, and the commands to try.
func (c *cluster) printReady() {
	w := c.out
	kubeconfig := c.rel(c.kubeconfig)
	fmt.Fprintf(w, "\nCluster ready: Kubernetes %s at %s\n", c.cp.ServerVersion, c.cp.Config.Host)
	fmt.Fprintf(w, "  kubeconfig  %s\n", kubeconfig)
	if c.node != nil {
		c.printRealCluster(w)
	} else {
		c.printSimulatedCluster(w)
	}
	fmt.Fprintf(w, "\n%s\n\n", tryHeader)
	kc := kubeconfig
	if !filepath.IsAbs(kc) {
		kc = "$PWD/" + kc
	}
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", kc)
	fmt.Fprintf(w, "  export %s=%s\n", registryEnv, c.registry)
	for i, t := range c.tries() {
		for j, s := range t.says {
			if j == 0 {
				fmt.Fprintf(w, "  # %d. %s\n", i+1, s)
			} else {
				fmt.Fprintf(w, "  #    %s\n", s)
			}
		}
		for _, cmd := range t.commands {
			fmt.Fprintf(w, "  %s\n", cmd)
		}
	}
	fmt.Fprintf(w, "\nCtrl-C here stops the cluster and every process it started.\n")
}

// printSimulatedCluster prints the test kubelet's and the host gate's
// lines of the ready block.
func (c *cluster) printSimulatedCluster(w io.Writer) {
	byZone := map[string][]string{}
	for _, n := range c.nodes {
		byZone[n.Zone] = append(byZone[n.Zone], n.Name)
	}
	var layout []string
	for _, z := range zones {
		layout = append(layout, z+": "+strings.Join(byZone[z], " "))
	}
	fmt.Fprintf(w, "  nodes       %s (label topology.kubernetes.io/zone)\n", strings.Join(layout, ", "))
	fmt.Fprintf(w, "  workloads   namespace %s, every pod running and ready:\n", c.opts.namespace)
	fmt.Fprintf(w, "    StatefulSet %-5s %d pods  driven by rollplan: managed, InPlaceIfPossible, max-unavailable 2, OnDelete\n", stsName, stsReplicas)
	fmt.Fprintf(w, "    DaemonSet   %-5s %d pods  rolled by its controller: RollingUpdate, maxUnavailable 1\n", dsName, len(c.nodes))
	fmt.Fprintf(w, "    Deployment  %-5s %d pods  rolled by its controller: RollingUpdate, 25%% surge, 25%% unavailable\n", deployName, deployScale)
	// docs/rollouts.md "Out of a broken rollout" runs here with the first tag.
	fmt.Fprintf(w, "  images      any name, nothing is pulled; by tag (docs/rollouts.md \"Out of a broken rollout\" sets $%s/testapp:%s):\n", registryEnv, imageTags[0].tag)
	for _, t := range imageTags {
		fmt.Fprintf(w, "    %-13s %s\n", ":"+t.tag, describe(t.b))
	}
	fmt.Fprintf(w, "    %-13s %s\n", "other tags", describe(defaultBehavior))
	if c.prom != nil {
		fmt.Fprintf(w, "  metrics     each running container exports http_requests_total{code} and http_request_duration_seconds:\n")
		fmt.Fprintf(w, "              %g requests/s while Ready, about %s each, answered 500 as its tag says (else never)\n", float64(kubelet.DefaultRequestRate), kubelet.DefaultLatency)
		fmt.Fprintf(w, "  prometheus  %s scrapes them every %s, labelled namespace, pod and container (log %s)\n", c.prom.URL, secs(prometheus.Interval), c.rel(c.promLog))
		fmt.Fprintf(w, "  analysis    %s names it for --analysis-config (docs/rollouts.md \"A bad version rolls back by itself\")\n", c.rel(c.analysisConfig))
	} else {
		fmt.Fprintf(w, "  prometheus  skipped: %s\n", c.promSkipped)
	}
	fmt.Fprintf(w, "  gate        rollplan gate at %s for namespace %s (log %s), run as\n", c.gateURL, c.opts.namespace, c.rel(c.gateLog))
	fmt.Fprintf(w, "              %s\n", c.gateCommand())
}
