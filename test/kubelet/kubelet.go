// Package kubelet is a test kubelet for a control plane without real
// nodes: it keeps Node objects, schedules pods onto them through the
// pods/binding subresource (DaemonSet pods to the node their affinity
// names), and writes pod status as a kubelet would — Pending, Running,
// Ready with real transition times, a container restart after an in-place
// image change, and per-image behaviour (slow starts, never ready, crash
// loops) so tests can model unhealthy rollouts.
//
// It is deliberately small: no containers run, no probes; what the
// controllers and rollplan see is the pod status this package writes.
package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
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

// SetNode adds or changes a node (taints, readiness, cordon) in the API.
func (k *Kubelet) SetNode(ctx context.Context, n Node) error {
	k.mu.Lock()
	k.nodes[n.Name] = n
	k.mu.Unlock()
	if err := k.applyNode(ctx, n); err != nil {
		return err
	}
	k.requeueAll()
	return nil
}

func (k *Kubelet) applyNode(ctx context.Context, n Node) error {
	lbls := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
	if n.Zone != "" {
		lbls[ZoneLabel] = n.Zone
	}
	for key, v := range n.Labels {
		lbls[key] = v
	}
	nodes := k.client.CoreV1().Nodes()
	cur, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: lbls},
			Spec:       corev1.NodeSpec{Taints: n.Taints, Unschedulable: n.Unschedulable},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("test kubelet: create node %s: %w", n.Name, err)
		}
	case err != nil:
		return fmt.Errorf("test kubelet: get node %s: %w", n.Name, err)
	}
	// Admission (TaintNodesByCondition) gives a new node the not-ready
	// taint, which the node lifecycle controller removes once the node is
	// Ready; that controller does not run here, so the kubelet sets the
	// node's taints itself.
	cur.Labels = lbls
	cur.Spec.Taints = n.Taints
	cur.Spec.Unschedulable = n.Unschedulable
	if cur, err = nodes.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("test kubelet: update node %s: %w", n.Name, err)
	}
	ready := corev1.ConditionTrue
	if n.NotReady {
		ready = corev1.ConditionFalse
	}
	now := metav1.Now()
	cur.Status = corev1.NodeStatus{
		Capacity:    nodeResources(),
		Allocatable: nodeResources(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, Reason: "TestKubelet",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}},
	}
	if _, err := nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("test kubelet: node %s status: %w", n.Name, err)
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("500"),
	}
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

// schedule binds a pod to a node: the node its required node affinity names
// (DaemonSet pods), else the feasible node with the fewest pods.
func (k *Kubelet) schedule(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	k.mu.Lock()
	nodes := k.sortedNodes()
	k.mu.Unlock()
	// A node cordoned through the API (kubectl cordon, rollplan's node
	// preparation) takes no pod that does not tolerate it, as with the
	// scheduler.
	if live, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		cordoned := map[string]bool{}
		for _, n := range live.Items {
			cordoned[n.Name] = n.Spec.Unschedulable
		}
		for i := range nodes {
			nodes[i].Unschedulable = nodes[i].Unschedulable || cordoned[nodes[i].Name]
		}
	}
	count := map[string]int{}
	if all, err := k.pods.List(labels.Everything()); err == nil {
		for _, p := range all {
			if p.Spec.NodeName != "" {
				count[p.Spec.NodeName]++
			}
		}
	}
	var best string
	for _, n := range nodes {
		if !k.feasible(pod, n) {
			continue
		}
		if best == "" || count[n.Name] < count[best] {
			best = n.Name
		}
	}
	if best == "" {
		return 2 * time.Second, nil // unschedulable for now; look again
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: best},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, best, err)
	}
	return 0, nil
}

func (k *Kubelet) feasible(pod *corev1.Pod, n Node) bool {
	if n.NotReady || (n.Unschedulable && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})) {
		return false
	}
	for _, t := range n.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(pod, t) {
			return false
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}}}
	if n.Zone != "" {
		node.Labels[ZoneLabel] = n.Zone
	}
	for key, v := range n.Labels {
		node.Labels[key] = v
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

func tolerates(pod *corev1.Pod, t corev1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// terminate removes a pod whose deletion was requested, after the image's
// termination delay: first its status says its containers exited, as the
// real kubelet's does (not on a node that is not ready: no kubelet writes
// there).
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod, node Node) (time.Duration, error) {
	var delay time.Duration
	for _, c := range pod.Spec.Containers {
		delay = max(delay, k.behavior(c.Image).TerminationDelay)
	}
	requested := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		requested = requested.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	if wait := time.Until(requested.Add(delay)); wait > 0 {
		return wait, nil
	}
	if st := terminated(pod, time.Now()); st != nil && !node.NotReady {
		p := pod.DeepCopy()
		p.Status = *st
		if _, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return 0, nil
			}
			return 0, fmt.Errorf("pod %s/%s: status of its exited containers: %w", pod.Namespace, pod.Name, err)
		}
	}
	uid := pod.UID
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return 0, nil
}

// terminated is the status of a deleted pod whose containers have exited
// on SIGTERM: each running container terminated Completed with exit code
// 0, not ready, not started; the pod Succeeded once none runs, and Ready,
// ContainersReady and PodReadyToStartContainers False (the sandbox is
// gone), as the real kubelet reports it. nil: no container ran (nothing
// to report).
func terminated(pod *corev1.Pod, now time.Time) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	t := metav1.NewTime(now.Truncate(time.Second))
	ran := false
	allDone := true
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if r := cs.State.Running; r != nil {
			ran = true
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", StartedAt: r.StartedAt, FinishedAt: t, ContainerID: cs.ContainerID,
			}}
		}
		cs.Ready, cs.Started = false, new(bool)
		if cs.State.Terminated == nil {
			allDone = false
		}
	}
	if !ran {
		return nil
	}
	if allDone {
		st.Phase = corev1.PodSucceeded
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		setCondition(st, typ, corev1.ConditionFalse, t)
	}
	orderConditions(st)
	return st
}

// ImageID is the imageID the kubelet reports for an image: a digest
// derived from the name, so a changed image has a changed ID.
func ImageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	repo := image
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// nextStatus computes the pod's next status at now, or nil when nothing
// changes yet, and when to look again.
func (k *Kubelet) nextStatus(pod *corev1.Pod, now time.Time) (*corev1.PodStatus, time.Duration) {
	old := &pod.Status
	st := old.DeepCopy()
	t := metav1.NewTime(now.Truncate(time.Second))
	if st.StartTime == nil {
		// The pod was just bound: Pending until the first container starts.
		st.Phase = corev1.PodPending
		st.StartTime = &t
		st.HostIP = "10.0.0.1"
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
		setCondition(st, corev1.PodScheduled, corev1.ConditionTrue, t)
		// The sandbox is not made yet: its condition turns True in the
		// next update, before any container runs.
		setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionFalse, t)
		setCondition(st, corev1.PodInitialized, corev1.ConditionTrue, t)
		setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, t)
		setCondition(st, corev1.PodReady, corev1.ConditionFalse, t)
		orderConditions(st)
		st.InitContainerStatuses = nil
		for _, c := range pod.Spec.InitContainers {
			st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: ImageID(c.Image),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: t, FinishedAt: t}},
			})
		}
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Started: new(bool),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
		return st, time.Millisecond
	}
	if c := condition(st, corev1.PodReadyToStartContainers); c == nil || c.Status != corev1.ConditionTrue {
		// The sandbox is up, its network too (the pod's IP): an update of
		// its own, as the real kubelet's.
		setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionTrue, t)
		if st.PodIP == "" {
			ip := podIP(pod.UID)
			st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
		orderConditions(st)
		return st, time.Millisecond
	}

	var next time.Duration
	soon := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	allReady := true
	for i, c := range pod.Spec.Containers {
		if i >= len(st.ContainerStatuses) || st.ContainerStatuses[i].Name != c.Name {
			st.ContainerStatuses = resetStatuses(pod)
		}
		cs := &st.ContainerStatuses[i]
		b := k.behavior(c.Image)
		running := cs.State.Running != nil
		if running && cs.Image != c.Image {
			// In-place image change: the container restarts with the new
			// image. The real kubelet kills and starts it in one sync and
			// writes the status after: the next update shows the new
			// container running (new imageID, one more restart, started)
			// and not Ready, never a waiting container in between; its
			// Ready waits StartDelay and ReadyDelay (restartedInPlace).
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", ExitCode: 0, StartedAt: cs.State.Running.StartedAt, FinishedAt: t, ContainerID: cs.ContainerID,
			}}
			cs.RestartCount++
			cs.Image, cs.ImageID = c.Image, ImageID(c.Image)
			cs.Ready = false
			cs.Started = ptrTrue()
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}
			cs.ContainerID = "test://" + string(pod.UID) + "/" + c.Name + fmt.Sprint("/", cs.RestartCount)
			if !b.NeverReady && !b.CrashLoop {
				soon(max(b.StartDelay+b.ReadyDelay, time.Millisecond))
			}
			allReady = false
			continue
		}
		switch {
		case b.CrashLoop:
			interval := b.CrashInterval
			if interval <= 0 {
				interval = time.Second
			}
			cs.Image, cs.ImageID, cs.Ready = c.Image, ImageID(c.Image), false
			last := st.StartTime.Time
			if ts := cs.LastTerminationState.Terminated; ts != nil {
				last = ts.FinishedAt.Time
			}
			if wait := last.Add(interval).Sub(now); wait > 0 {
				soon(wait)
			} else {
				cs.RestartCount++
				cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: t}}
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
				soon(interval)
			}
			allReady = false
		case !running:
			since := st.StartTime.Time
			if ts := cs.LastTerminationState.Terminated; ts != nil && ts.FinishedAt.After(since) {
				since = ts.FinishedAt.Time
			}
			if wait := since.Add(b.StartDelay).Sub(now); wait > 0 {
				soon(wait)
				allReady = false
				continue
			}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}
			cs.Image, cs.ImageID = c.Image, ImageID(c.Image)
			cs.ContainerID = "test://" + string(pod.UID) + "/" + c.Name + fmt.Sprint("/", cs.RestartCount)
			cs.Started = ptrTrue()
			// Not Ready in the update that reports it running: the real
			// kubelet's readiness probe runs after the start.
			cs.Ready = false
			allReady = false
			if !b.NeverReady && !k.isBroken(pod) {
				soon(max(b.ReadyDelay, time.Millisecond))
			}
			continue
		default:
			if b.NeverReady || !k.isReleased(pod, cs) || k.isBroken(pod) {
				cs.Ready = false
				allReady = false
				continue
			}
			if !cs.Ready {
				delay := b.ReadyDelay
				if restartedInPlace(cs) {
					delay += b.StartDelay
				}
				if wait := cs.State.Running.StartedAt.Add(delay).Sub(now); wait > 0 {
					soon(wait)
					allReady = false
					continue
				}
				cs.Ready = true
			}
		}
		cs.Resources = resourcesOf(c)
	}
	// Running once a container has started, as upstream: a restarting
	// container keeps the pod Running.
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running != nil || cs.RestartCount > 0 {
			st.Phase = corev1.PodRunning
		}
	}
	if st.PodIP == "" {
		ip := podIP(pod.UID)
		st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	cready := corev1.ConditionFalse
	if allReady {
		cready = corev1.ConditionTrue
	}
	setCondition(st, corev1.ContainersReady, cready, t)
	// Ready also needs every readiness gate's condition True, as upstream.
	ready := cready
	for _, g := range pod.Spec.ReadinessGates {
		if c := condition(st, g.ConditionType); c == nil || c.Status != corev1.ConditionTrue {
			ready = corev1.ConditionFalse
		}
	}
	setCondition(st, corev1.PodReady, ready, t)
	orderConditions(st)
	if statusEqual(old, st) {
		return nil, next
	}
	return st, next
}

// restartedInPlace: the running container replaced one the image change
// stopped, in the same instant (the in-place restart above), so it has
// not waited its image's StartDelay yet.
func restartedInPlace(cs *corev1.ContainerStatus) bool {
	ts := cs.LastTerminationState.Terminated
	return ts != nil && cs.State.Running != nil && ts.FinishedAt.Equal(&cs.State.Running.StartedAt)
}

// kubeletConditions are the conditions the real kubelet writes, in its
// order; it keeps the pod's other conditions (readiness gates', a
// disruption's) before them.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled,
}

// orderConditions puts the conditions in the real kubelet's order: the
// others first as they were, then the kubelet's own.
func orderConditions(st *corev1.PodStatus) {
	rank := func(t corev1.PodConditionType) int {
		for i, k := range kubeletConditions {
			if k == t {
				return i + 1
			}
		}
		return 0
	}
	sort.SliceStable(st.Conditions, func(i, j int) bool { return rank(st.Conditions[i].Type) < rank(st.Conditions[j].Type) })
}

func resetStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		out[i] = corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	}
	return out
}

func resourcesOf(c corev1.Container) *corev1.ResourceRequirements {
	if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
		return nil
	}
	r := c.Resources.DeepCopy()
	r.Claims = nil
	return r
}

func ptrTrue() *bool { b := true; return &b }

func podIP(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("10.%d.%d.%d", 64+sum[0]%64, sum[1], 1+sum[2]%254)
}

func condition(st *corev1.PodStatus, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition, moving lastTransitionTime only when the
// status changes, as the kubelet does.
func setCondition(st *corev1.PodStatus, typ corev1.PodConditionType, status corev1.ConditionStatus, t metav1.Time) {
	if c := condition(st, typ); c != nil {
		if c.Status != status {
			c.Status, c.LastTransitionTime = status, t
		}
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: t})
}

func statusEqual(a, b *corev1.PodStatus) bool {
	return a.String() == b.String()
}
