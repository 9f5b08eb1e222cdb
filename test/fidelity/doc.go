// Package fidelity proves the default strategy against the real
// controllers: it runs rollouts on the control planes built from pinned
// Kubernetes sources (test/controlplane; v1.36 and v1.37, each at its
// default feature gates, and the runs with gates a scenario names) with the
// test kubelet, and before every step the controllers take, plans the same
// cluster state with `rollplan plan --kubernetes-version <that version>`
// and compares the plan's next wave with what the controllers then did.
// TestRevisionNames checks on each control plane that the facts name the
// ReplicaSets and ControllerRevisions the controllers make.
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
