// Package kubelet is a test kubelet for a control plane without real
// nodes: it keeps Node objects, schedules pods onto them through the
// pods/binding subresource (DaemonSet pods to the node their affinity
// names), and writes pod status as a kubelet would — Pending, Running,
// Ready with real transition times, a container restart after an in-place
// image change, and per-image behaviour (slow starts, never ready, crash
// loops) so tests can model unhealthy rollouts. With Options.Metrics it
// also runs, per container, an exporter of the traffic the container
// would serve (metrics.go), for a Prometheus to scrape: a bad version's
// error rate is per-image behaviour too.
//
// It is deliberately small: no containers run, no probes; what the
// controllers and rollplan see is the pod status this package writes.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ZoneLabel is the well-known zone label the kubelet sets on its nodes.
const ZoneLabel = "topology.kubernetes.io/zone"

// Node describes one node the kubelet keeps.
type Node struct {
	Name   string
	Zone   string
	Labels map[string]string
	Taints []corev1.Taint
	// Unschedulable cordons the node.
	Unschedulable bool
	// NotReady makes the node report Ready=False; its pods are not started.
	NotReady bool
}

// Behavior is how containers of one image behave.
type Behavior struct {
	// StartDelay: from binding (or a crash) to the container running.
	// After an in-place image change the new container is reported
	// running at once, as the real kubelet does (it kills and starts in
	// one sync and writes the status after), and StartDelay delays its
	// Ready instead.
	StartDelay time.Duration
	// ReadyDelay: from running to Ready; never in the update that reports
	// the container running (a real readiness probe runs after the start).
	ReadyDelay time.Duration
	// NeverReady: runs but never becomes Ready.
	NeverReady bool
	// CrashLoop: the container keeps restarting (every CrashInterval,
	// default 1 s) and is never Ready.
	CrashLoop     bool
	CrashInterval time.Duration
	// TerminationDelay: from the deletion request to the containers'
	// exit, which is reported (phase Succeeded, exit code 0, not Ready)
	// before the pod is removed.
	TerminationDelay time.Duration
	// ErrorRatio: the share of requests the container answers 500 in
	// the traffic its exporter reports (Options.Metrics), from 0 to 1.
	ErrorRatio float64
	// Latency: the median duration of those requests (they take from
	// half to one and a half times it); default DefaultLatency.
	Latency time.Duration
}

// Options configure a Kubelet.
type Options struct {
	Nodes []Node
	// Images maps a container image to its behaviour; other images use
	// Default.
	Images map[string]Behavior
	// Tags maps an image tag (after the name's last ':', a digest left
	// out) to its behaviour, for the images Images does not name: one
	// name convention for every repository, as the dev cluster's
	// ":crashloop" for a user who cannot call SetImage.
	Tags    map[string]Behavior
	Default Behavior
	// Namespace limits the pods handled; empty means all namespaces.
	Namespace string
	// HoldReady keeps started containers not Ready until Release lets
	// them: a test then decides when pods become available, and can look
	// at the cluster in between (the fidelity suite's steps).
	HoldReady bool
	// Metrics, when set, runs an exporter of simulated traffic per
	// container (metrics.go) for a Prometheus to scrape.
	Metrics *Metrics
}

// Kubelet plays the kubelet (and the scheduler) for every node it keeps.
type Kubelet struct {
	client kubernetes.Interface
	ns     string

	mu      sync.Mutex
	nodes   map[string]Node
	images  map[string]Behavior
	tags    map[string]Behavior
	deflt   Behavior
	started bool
	hold    bool
	// broken: pods (UID) whose containers stopped being Ready (Break).
	broken map[types.UID]bool
	// released: containers (pod UID/container/image) Release let become Ready.
	released map[string]bool

	// metrics: the containers' exporters; nil without Options.Metrics.
	metrics *exporters

	pods  corelisters.PodLister
	queue workqueue.TypedRateLimitingInterface[string]
}

// New returns a kubelet; Run starts it.
func New(client kubernetes.Interface, opts Options) *Kubelet {
	k := &Kubelet{
		client:   client,
		ns:       opts.Namespace,
		nodes:    map[string]Node{},
		images:   map[string]Behavior{},
		tags:     map[string]Behavior{},
		deflt:    opts.Default,
		hold:     opts.HoldReady,
		released: map[string]bool{},
		broken:   map[types.UID]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, 2*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "test-kubelet"}),
	}
	for _, n := range opts.Nodes {
		k.nodes[n.Name] = n
	}
	for img, b := range opts.Images {
		k.images[img] = b
	}
	for tag, b := range opts.Tags {
		k.tags[tag] = b
	}
	if opts.Metrics != nil {
		k.metrics = newExporters(*opts.Metrics, k.behavior)
	}
	return k
}

// SetImage sets the behaviour of an image from now on.
func (k *Kubelet) SetImage(image string, b Behavior) {
	k.mu.Lock()
	k.images[image] = b
	k.mu.Unlock()
	k.requeueAll()
}

func (k *Kubelet) behavior(image string) Behavior {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.behaviorLocked(image)
}

// behaviorLocked is behavior with mu held: the image's own, else its
// tag's, else the default.
func (k *Kubelet) behaviorLocked(image string) Behavior {
	if b, ok := k.images[image]; ok {
		return b
	}
	if tag := imageTag(image); tag != "" {
		if b, ok := k.tags[tag]; ok {
			return b
		}
	}
	return k.deflt
}

// imageTag is the tag of an image reference ("v2" of
// "registry:5000/web:v2@sha256:..."), "" when it has none.
func imageTag(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return ""
}

func (k *Kubelet) node(name string) (Node, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.nodes[name]
	return n, ok
}

// Run creates the nodes, waits for the pod cache and handles pods until
// ctx ends. It returns once the nodes exist and the workers run; errors
// later are retried.
func (k *Kubelet) Run(ctx context.Context) error {
	k.mu.Lock()
	if k.started {
		k.mu.Unlock()
		return errors.New("test kubelet: Run called twice")
	}
	k.started = true
	nodes := k.sortedNodes()
	k.mu.Unlock()
	for _, n := range nodes {
		if err := k.applyNode(ctx, n); err != nil {
			return err
		}
	}
	var factoryOpts []informers.SharedInformerOption
	if k.ns != "" {
		factoryOpts = append(factoryOpts, informers.WithNamespace(k.ns))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, factoryOpts...)
	podInformer := factory.Core().V1().Pods()
	k.pods = podInformer.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("test kubelet: pod handler: %w", err)
	}
	if k.metrics != nil {
		if err := k.watchMetrics(podInformer.Informer()); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return fmt.Errorf("test kubelet: pod cache did not sync: %w", ctx.Err())
	}
	for range 4 {
		go k.worker(ctx)
	}
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
		factory.Shutdown()
		if k.metrics != nil {
			k.metrics.close()
		}
	}()
	return nil
}

func (k *Kubelet) sortedNodes() []Node {
	out := make([]Node, 0, len(k.nodes))
	for _, n := range k.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Release lets every container that runs now become Ready (after its
// image's ReadyDelay) and waits until the API shows those pods Ready; pods
// of NeverReady or CrashLoop images stay as they are. It returns the
// names of the pods it released.
func (k *Kubelet) Release(ctx context.Context) ([]string, error) {
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var names []string
	waitFor := map[types.UID]string{}
	k.mu.Lock()
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		if _, ours := k.nodes[p.Spec.NodeName]; !ours {
			continue
		}
		held := false
		for _, cs := range p.Status.ContainerStatuses {
			key := string(p.UID) + "/" + cs.Name + "/" + cs.Image
			if cs.State.Running != nil && !cs.Ready && !k.released[key] {
				k.released[key] = true
				held = true
			}
		}
		if held {
			names = append(names, p.Namespace+"/"+p.Name)
			if k.canBeReady(p) {
				waitFor[p.UID] = p.Namespace + "/" + p.Name
			}
		}
	}
	k.mu.Unlock()
	sort.Strings(names)
	for _, key := range names {
		k.queue.Add(key)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for uid, key := range waitFor {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			p, err := k.pods.Pods(ns).Get(name)
			if err != nil || p.UID != uid {
				delete(waitFor, uid) // gone: nothing to wait for
				continue
			}
			if c := condition(&p.Status, corev1.ContainersReady); c != nil && c.Status == corev1.ConditionTrue {
				delete(waitFor, uid)
			}
		}
		return len(waitFor) == 0, nil
	})
	if err != nil {
		return names, fmt.Errorf("test kubelet: released pods not ready: %v: %w", waitFor, err)
	}
	return names, nil
}

// Break makes a pod's containers fail their readiness from now on (the pod
// stays Running, not Ready) and waits until the API shows it.
func (k *Kubelet) Break(ctx context.Context, namespace, name string) error {
	pod, err := k.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("test kubelet: break pod %s/%s: %w", namespace, name, err)
	}
	k.mu.Lock()
	k.broken[pod.UID] = true
	k.mu.Unlock()
	k.queue.Add(namespace + "/" + name)
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p, err := k.pods.Pods(namespace).Get(name)
		if err != nil {
			return false, nil
		}
		c := condition(&p.Status, corev1.PodReady)
		return c != nil && c.Status == corev1.ConditionFalse, nil
	})
}

func (k *Kubelet) isBroken(pod *corev1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.broken[pod.UID]
}

// canBeReady: the pod's images can all become Ready. Called with mu held.
func (k *Kubelet) canBeReady(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		b := k.behaviorLocked(c.Image)
		if b.NeverReady || b.CrashLoop || k.broken[p.UID] {
			return false
		}
	}
	return true
}

func (k *Kubelet) isReleased(pod *corev1.Pod, cs *corev1.ContainerStatus) bool {
	if !k.hold {
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.released[string(pod.UID)+"/"+cs.Name+"/"+cs.Image]
}

func (k *Kubelet) requeueAll() {
	if k.pods == nil {
		return
	}
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		k.queue.Add(p.Namespace + "/" + p.Name)
	}
}

func (k *Kubelet) worker(ctx context.Context) {
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		after, err := k.sync(ctx, key)
		switch {
		case err != nil && ctx.Err() == nil:
			k.queue.AddRateLimited(key)
		case after > 0:
			k.queue.Forget(key)
			k.queue.AddAfter(key, after)
		default:
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// sync moves one pod a step along its life and says when to look again.
func (k *Kubelet) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil {
			return 0, nil
		}
		return k.schedule(ctx, pod)
	}
	node, ok := k.node(pod.Spec.NodeName)
	if !ok {
		return 0, nil // another kubelet's pod
	}
	if pod.DeletionTimestamp != nil {
		return k.terminate(ctx, pod, node)
	}
	if node.NotReady || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, nil
	}
	status, after := k.nextStatus(pod, time.Now())
	if status == nil {
		return after, nil
	}
	p := pod.DeepCopy()
	p.Status = *status
	if _, err := k.client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("pod %s status: %w", key, err)
	}
	return after, nil
}
