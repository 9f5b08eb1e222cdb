// Package fidelity proves the default strategy against the real
// controllers: it runs rollouts on a control plane built from pinned
// Kubernetes sources (test/controlplane) with the test kubelet, and before
// every step the controllers take, plans the same cluster state with
// `rollplan plan` and compares the plan's next wave with what the
// controllers then did.
//
// A step: the controllers are frozen (SIGSTOP), the change that lets the
// rollout move is made (the template change, or the kubelet letting the
// pods it holds become Ready), the cluster is captured and planned, the
// controllers are resumed, and every change they make until the cluster is
// quiet again is recorded from watch events. The kubelet holds new pods
// not Ready, so a step is exactly what the controllers do without waiting
// for a pod to become available: the plan's waves that start before the
// first availability it has to wait for.
//
// The suite runs with `make test-cluster`; without ROLLPLAN_CLUSTER_BIN the
// tests that need the control plane skip.
package fidelity
