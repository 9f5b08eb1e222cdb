// Package live is the observed state of a cluster, as the consumers read
// it: which workload (Target), how to read it (Reader: a fresh capture, or
// informer caches), and what its pods say beyond their status: an in-place
// update in flight (InFlight, the InPlaceRecord the executor leaves on the
// pod), the readiness gate's condition, a Deployment's revision history.
// Observe turns a read into the facts the planner plans from.
//
// The executor, the gate, history and status read a cluster through it; it
// imports none of them. It writes nothing: the executor is the consumer
// that writes.
package live
