package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Shell completion of KIND/NAME and POD arguments, as kubectl completes
// its own: from the cluster the command's flags name (-n, --context,
// --kubeconfig, ...), or from the snapshot files of -f (plan, explain).
// cobra's hidden __complete command answers; deploy/kubectl_complete-rollplan
// hands `kubectl rollplan ...` completions to it.

// completeTimeout bounds the reads of one completion: a TAB must not hang
// on an unreachable API server.
const completeTimeout = 5 * time.Second

// workloadKinds: each kind as completion spells it, and its short name.
var workloadKinds = []struct{ kind, long, short string }{
	{capture.Deployment, "deployment", "deploy"},
	{capture.StatefulSet, "statefulset", "sts"},
	{capture.DaemonSet, "daemonset", "ds"},
}

// workloadName is a workload a completion may offer: its kind (capture's
// name) and what follows KIND/ (NAME, or NAMESPACE/NAME).
type workloadName struct{ kind, rest string }

// workloadCompletions offers the workloads ws as KIND/REST that start
// with toComplete: the kind spelled as typed once a "/" is typed, else
// its long name (or its short one when toComplete starts like that).
// With no workload to offer, it offers the kinds ("statefulset/", no
// space after), so that KIND/ can be typed first.
func workloadCompletions(ws []workloadName, toComplete string) ([]string, cobra.ShellCompDirective) {
	typed, _, slash := strings.Cut(toComplete, "/")
	spell := func(kind string) string {
		for _, k := range workloadKinds {
			if k.kind != kind {
				continue
			}
			switch {
			case slash:
				if ref, err := capture.ParseRef(typed + "/x"); err == nil && ref.Kind == kind {
					return typed
				}
				return ""
			case strings.HasPrefix(k.long, toComplete):
				return k.long
			case strings.HasPrefix(k.short, toComplete):
				return k.short
			}
		}
		return ""
	}
	var out []string
	for _, w := range ws {
		if s := spell(w.kind); s != "" && strings.HasPrefix(s+"/"+w.rest, toComplete) {
			out = append(out, s+"/"+w.rest)
		}
	}
	if len(out) > 0 || slash {
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
	for _, k := range workloadKinds {
		if s := spell(k.kind); s != "" {
			out = append(out, s+"/")
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// clusterWorkloads lists the Deployments, StatefulSets and DaemonSets of
// namespace ns ("": the kubeconfig's) in the cluster config names. A kind
// that cannot be listed (RBAC) is left out; an error only when none can.
func clusterWorkloads(ctx context.Context, config *kubeFlags, ns string) ([]workloadName, error) {
	cl, err := connectCluster(config)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		ns = cl.namespace
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	apps := cl.client.AppsV1()
	var out []workloadName
	var lastErr error
	listed := 0
	for _, k := range workloadKinds {
		var names []string
		var err error
		switch k.kind {
		case capture.Deployment:
			ds, e := apps.Deployments(ns).List(ctx, metav1.ListOptions{})
			if err = e; e == nil {
				for _, d := range ds.Items {
					names = append(names, d.Name)
				}
			}
		case capture.StatefulSet:
			ss, e := apps.StatefulSets(ns).List(ctx, metav1.ListOptions{})
			if err = e; e == nil {
				for _, s := range ss.Items {
					names = append(names, s.Name)
				}
			}
		case capture.DaemonSet:
			ds, e := apps.DaemonSets(ns).List(ctx, metav1.ListOptions{})
			if err = e; e == nil {
				for _, d := range ds.Items {
					names = append(names, d.Name)
				}
			}
		}
		if err != nil {
			lastErr = err
			continue
		}
		listed++
		for _, n := range names {
			out = append(out, workloadName{kind: k.kind, rest: n})
		}
	}
	if listed == 0 {
		return nil, lastErr
	}
	return out, nil
}

// completeWorkloads completes KIND/NAME arguments from the cluster config
// names: one (many false), or any number, each named once (snapshot).
func completeWorkloads(config *kubeFlags, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ws, err := clusterWorkloads(commandContext(cmd), config, "")
		if err != nil {
			cobra.CompDebugln("list workloads: "+err.Error(), true)
			return nil, cobra.ShellCompDirectiveError
		}
		given := map[capture.Ref]bool{}
		for _, a := range args {
			if ref, err := capture.ParseRef(a); err == nil {
				given[ref] = true
			}
		}
		ws = slices.DeleteFunc(ws, func(w workloadName) bool { return given[capture.Ref{Kind: w.kind, Name: w.rest}] })
		return workloadCompletions(ws, toComplete)
	}
}

func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// snapshotFiles loads the snapshot files of -f for a completion: given
// says -f names files ("-", the standard input, is not read); s is nil
// when they cannot be read (nothing is offered then).
func snapshotFiles(f *planFlags) (s *snapshot.Snapshot, given bool) {
	files := slices.DeleteFunc(slices.Clone(f.files), func(s string) bool { return s == "-" })
	if len(f.files) == 0 {
		return nil, false
	}
	if len(files) == 0 {
		return nil, true
	}
	s, _, err := snapshot.LoadFiles(files)
	if err != nil {
		cobra.CompDebugln("load the snapshot: "+err.Error(), true)
		return nil, true
	}
	return s, true
}

// snapshotWorkloads are the workloads of s in namespace ns (""; every
// namespace): NAME when they all are in one namespace or ns is given,
// else NAMESPACE/NAME when qualified (plan --workload takes it).
func snapshotWorkloads(s *snapshot.Snapshot, ns string, qualified bool) []workloadName {
	type w struct{ kind, ns, name string }
	var all []w
	for _, d := range s.Deployments {
		all = append(all, w{capture.Deployment, d.Namespace, d.Name})
	}
	for _, d := range s.StatefulSets {
		all = append(all, w{capture.StatefulSet, d.Namespace, d.Name})
	}
	for _, d := range s.DaemonSets {
		all = append(all, w{capture.DaemonSet, d.Namespace, d.Name})
	}
	namespaces := map[string]bool{}
	for _, x := range all {
		if ns == "" || x.ns == ns {
			namespaces[x.ns] = true
		}
	}
	var out []workloadName
	for _, x := range all {
		switch {
		case ns != "" && x.ns != ns:
		case qualified && len(namespaces) > 1:
			out = append(out, workloadName{x.kind, x.ns + "/" + x.name})
		default:
			out = append(out, workloadName{x.kind, x.name})
		}
	}
	return out
}

// completePlanWorkload completes plan's --workload from the snapshot files of -f.
func completePlanWorkload(f *planFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		s, _ := snapshotFiles(f)
		if s == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return workloadCompletions(snapshotWorkloads(s, f.namespace, true), toComplete)
	}
}

// completeExplain completes explain's argument: a pod (POD, or
// NAMESPACE/POD once a "/" is typed), or with --wave a workload
// (KIND/NAME), from the snapshot files of -f, else from the cluster its
// kubeconfig flags name (explain --change without -f reads it).
func completeExplain(f *planFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		wave := cmd.Flags().Changed("wave")
		s, fromFiles := snapshotFiles(f)
		if fromFiles && s == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if wave {
			if fromFiles {
				return workloadCompletions(snapshotWorkloads(s, f.namespace, false), toComplete)
			}
			ws, err := clusterWorkloads(commandContext(cmd), &f.config, f.namespace)
			if err != nil {
				cobra.CompDebugln("list workloads: "+err.Error(), true)
				return nil, cobra.ShellCompDirectiveError
			}
			return workloadCompletions(ws, toComplete)
		}
		type pod struct{ ns, name string }
		var pods []pod
		if fromFiles {
			for _, p := range s.Pods {
				pods = append(pods, pod{p.Namespace, p.Name})
			}
		} else {
			cl, err := connectCluster(&f.config)
			if err != nil {
				cobra.CompDebugln("connect: "+err.Error(), true)
				return nil, cobra.ShellCompDirectiveError
			}
			ns := f.namespace
			if ns == "" {
				ns = cl.namespace
			}
			ctx, cancel := context.WithTimeout(commandContext(cmd), completeTimeout)
			defer cancel()
			l, err := cl.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				cobra.CompDebugln("list pods: "+err.Error(), true)
				return nil, cobra.ShellCompDirectiveError
			}
			for _, p := range l.Items {
				pods = append(pods, pod{p.Namespace, p.Name})
			}
		}
		_, _, qualified := strings.Cut(toComplete, "/")
		var out []string
		for _, p := range pods {
			c := p.name
			if qualified {
				c = p.ns + "/" + p.name
			}
			if (f.namespace == "" || p.ns == f.namespace) && strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}
