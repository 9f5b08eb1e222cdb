package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// The benchmark cluster: benchSets StatefulSets of benchReplicas pods
// (10,000 pods), spread over benchNamespaces namespaces and benchNodes
// nodes in three zones. Every set is OnDelete, managed by rollplan with
// max-unavailable 10% (10 pods), at one revision, every pod Ready and
// available for an hour; every fourth set has a PDB (maxUnavailable 5).
const (
	benchNamespaces = 5
	benchSets       = 100
	benchReplicas   = 100
	benchNodes      = 150
	benchImage      = "registry.example.com/team/db:1.0.0"
)

var benchNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func benchNamespace(set int) string { return fmt.Sprintf("team-%d", set%benchNamespaces) }
func benchSetName(set int) string   { return fmt.Sprintf("db-%02d", set) }
func benchPodName(set, i int) string {
	return fmt.Sprintf("%s-%d", benchSetName(set), i)
}

func benchTemplate(set int, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": benchSetName(set), "tier": "db"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "db", Image: image,
				Ports: []corev1.ContainerPort{{Name: "sql", ContainerPort: 5432, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{
					{Name: "MODE", Value: "replica"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}},
					PeriodSeconds: 5},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr.To(int64(30)), SchedulerName: corev1.DefaultSchedulerName,
		},
	}
}

func benchSet(set int) *appsv1.StatefulSet {
	name := benchSetName(set)
	s := testobj.StatefulSet(benchNamespace(set), name).
		Meta(metav1.ObjectMeta{Namespace: benchNamespace(set), Name: name, UID: types.UID(name + "-uid"), Generation: 3, ResourceVersion: "100",
			CreationTimestamp: metav1.NewTime(benchNow.Add(-24 * time.Hour))}).
		Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: "10%"}).
		Replicas(benchReplicas).ServiceName(name).PodManagement(appsv1.ParallelPodManagement).OnDelete().
		Template(benchTemplate(set, benchImage)).Selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}).Obj()
	s.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: benchReplicas, ReadyReplicas: benchReplicas,
		AvailableReplicas: benchReplicas, CurrentReplicas: benchReplicas, UpdatedReplicas: benchReplicas,
		CurrentRevision: name + "-rev1", UpdateRevision: name + "-rev1"}
	return s
}

func benchRevision(s *appsv1.StatefulSet) *appsv1.ControllerRevision {
	t := s.Spec.Template
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{
		"$patch": "replace", "metadata": map[string]any{"labels": t.Labels}, "spec": t.Spec,
	}}}
	raw, err := json.Marshal(patch)
	if err != nil {
		panic(err)
	}
	rev := s.Name + "-rev1"
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: rev, UID: types.UID(rev + "-uid"),
			Labels:          map[string]string{"app": s.Name, appsv1.ControllerRevisionHashLabelKey: rev},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID, Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1,
	}
}

func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%03d", i)
	return testobj.Node(name).Meta(metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"),
		Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+i%3), corev1.LabelHostname: name}}).Ready().Obj()
}

func benchPod(set, i int) *corev1.Pod {
	s := benchSet(set)
	name := benchPodName(set, i)
	t := benchTemplate(set, benchImage)
	labels := map[string]string{appsv1.ControllerRevisionHashLabelKey: s.Name + "-rev1", "apps.kubernetes.io/pod-index": fmt.Sprint(i),
		"statefulset.kubernetes.io/pod-name": name}
	for k, v := range t.Labels {
		labels[k] = v
	}
	started := metav1.NewTime(benchNow.Add(-time.Hour))
	node := fmt.Sprintf("node-%03d", (set*7+i)%benchNodes)
	p := testobj.Pod(s.Namespace, name).
		Meta(metav1.ObjectMeta{Namespace: s.Namespace, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "200",
			CreationTimestamp: started, Labels: labels, GenerateName: s.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}).
		Node(node).Containers(t.Spec.Containers...).Obj()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Spec.Hostname, p.Spec.Subdomain = name, s.Name
	p.Spec.RestartPolicy, p.Spec.DNSPolicy, p.Spec.SchedulerName = t.Spec.RestartPolicy, t.Spec.DNSPolicy, t.Spec.SchedulerName
	p.Spec.TerminationGracePeriodSeconds = t.Spec.TerminationGracePeriodSeconds
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.1.0.1", StartTime: &started, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "db", Image: benchImage, ImageID: "registry.example.com/team/db@sha256:0123456789abcdef",
			ContainerID: "containerd://" + name, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
	return p
}

func benchPDB(s *appsv1.StatefulSet) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: types.UID(s.Name + "-pdb-uid"), Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(5)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.Name}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: benchReplicas, DesiredHealthy: benchReplicas - 5,
			ExpectedPods: benchReplicas, DisruptionsAllowed: 5},
	}
}

// benchCluster is the informer cache of the benchmark cluster, built once
// per test binary and only by the benchmarks and the load test.
type benchCluster struct {
	src *capture.ListerSource
}

var (
	benchOnce    sync.Once
	benchShared  *benchCluster
	benchErr     error
	benchBuiltIn time.Duration
)

func benchFixture(tb testing.TB) *benchCluster {
	tb.Helper()
	benchOnce.Do(func() {
		start := time.Now()
		benchShared, benchErr = buildBenchCluster()
		benchBuiltIn = time.Since(start)
	})
	if benchErr != nil {
		tb.Fatal(benchErr)
	}
	return benchShared
}

// buildBenchCluster loads the cluster into informers through a fake
// clientset whose lists are generated on demand: the informer caches hold
// the only copy of the objects, as in the gate's process (an object
// tracker would hold a second one, doubling the heap the collector scans).
func buildBenchCluster() (*benchCluster, error) {
	lists := map[string]func() runtime.Object{
		"nodes": func() runtime.Object {
			l := &corev1.NodeList{}
			for i := range benchNodes {
				l.Items = append(l.Items, *benchNode(i))
			}
			return l
		},
		"statefulsets": func() runtime.Object {
			l := &appsv1.StatefulSetList{}
			for set := range benchSets {
				l.Items = append(l.Items, *benchSet(set))
			}
			return l
		},
		"controllerrevisions": func() runtime.Object {
			l := &appsv1.ControllerRevisionList{}
			for set := range benchSets {
				l.Items = append(l.Items, *benchRevision(benchSet(set)))
			}
			return l
		},
		"poddisruptionbudgets": func() runtime.Object {
			l := &policyv1.PodDisruptionBudgetList{}
			for set := 0; set < benchSets; set += 4 {
				l.Items = append(l.Items, *benchPDB(benchSet(set)))
			}
			return l
		},
		"pods": func() runtime.Object {
			l := &corev1.PodList{}
			for set := range benchSets {
				for i := range benchReplicas {
					l.Items = append(l.Items, *benchPod(set, i))
				}
			}
			return l
		},
	}
	cs := fake.NewClientset()
	cs.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if list, ok := lists[a.GetResource().Resource]; ok {
			return true, list(), nil
		}
		return false, nil, nil // the other kinds: empty
	})
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(capture.StripManagedFields)) // as rollplan gate caches
	c := &benchCluster{src: capture.NewListerSource(factory, factory)}
	stop := make(chan struct{}) // the informers live as long as the test binary
	factory.Start(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.src.WaitForSync(ctx); err != nil {
		return nil, err
	}
	pods, err := c.src.Pods(ctx, metav1.NamespaceAll, nil)
	if err != nil {
		return nil, err
	}
	if len(pods) != benchSets*benchReplicas {
		return nil, fmt.Errorf("cache holds %d pods, want %d", len(pods), benchSets*benchReplicas)
	}
	goruntime.GC() // start the measurements from the cache alone
	return c, nil
}

// benchEngines are the engines the gate is measured with: the built-in
// default strategy in Rego (the production default) and native.
func benchEngines(tb testing.TB) []engine.Engine {
	tb.Helper()
	return []engine.Engine{benchRego(tb), native.New()}
}

// benchRego compiles the Rego policy at paths (none: the default strategy).
func benchRego(tb testing.TB, paths ...string) engine.Engine {
	tb.Helper()
	re, err := rego.Load(context.Background(), paths, 2*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return re
}

// benchGate is a gate as `rollplan gate` builds it: JSON decision log
// (discarded here), metrics, Deny enforcement, a clock running from benchNow.
func benchGate(tb testing.TB, c *benchCluster, e engine.Engine) *gate.Gate {
	tb.Helper()
	// The clock runs from benchNow: every second the gate rebuilds each
	// workload's state it is asked about (its state cache is per second),
	// as it does in a cluster.
	start := time.Now()
	g, err := gate.New(gate.Options{
		Engine: e, Cache: c.src, Store: &gate.MemoryStore{}, Enforcement: gate.Deny, Namespace: "rollplan-system",
		Now: func() time.Time { return benchNow.Add(time.Since(start)) }, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Metrics: gate.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// Requests, as the API server sends them (JSON AdmissionReviews).

var benchUser = `{"username":"system:serviceaccount:kube-system:node-drainer","uid":"u-1","groups":["system:serviceaccounts","system:authenticated"]}`

func reviewJSON(tb testing.TB, req *admissionv1.AdmissionRequest) []byte {
	tb.Helper()
	if err := json.Unmarshal([]byte(benchUser), &req.UserInfo); err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// evictionReview: a pods/eviction CREATE (dry-run: never reserves, so
// every request is judged against the same state).
func evictionReview(tb testing.TB, p *corev1.Pod, uid string, dryRun bool) []byte {
	ev := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
	return reviewJSON(tb, &admissionv1.AdmissionRequest{
		UID:         types.UID(uid),
		Kind:        metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		SubResource: "eviction", RequestKind: &metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		RequestResource: &metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, RequestSubResource: "eviction",
		Name: p.Name, Namespace: p.Namespace, Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: mustJSON(tb, ev)}, DryRun: &dryRun,
		Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
	})
}

// deleteReview: a pod DELETE with oldObject, not dry-run: an admitted one
// reserves the pod's unit of budget (see the benchmark for the pods used).
func deleteReview(tb testing.TB, p *corev1.Pod, uid string) []byte {
	return reviewJSON(tb, &admissionv1.AdmissionRequest{
		UID:      types.UID(uid),
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:     p.Name, Namespace: p.Namespace, Operation: admissionv1.Delete,
		OldObject: runtime.RawExtension{Raw: mustJSON(tb, p)}, DryRun: ptr.To(false),
		Options: runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}`)},
	})
}

// updateReview: a StatefulSet UPDATE that changes the image: the gate
// plans the rollout it starts and answers with a warning.
func updateReview(tb testing.TB, s *appsv1.StatefulSet, uid string) []byte {
	cur := s.DeepCopy()
	cur.Generation++
	cur.Spec.Template.Spec.Containers[0].Image = "registry.example.com/team/db:1.1.0"
	return reviewJSON(tb, &admissionv1.AdmissionRequest{
		UID:      types.UID(uid),
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"},
		Name:     s.Name, Namespace: s.Namespace, Operation: admissionv1.Update,
		Object: runtime.RawExtension{Raw: mustJSON(tb, cur)}, OldObject: runtime.RawExtension{Raw: mustJSON(tb, s)}, DryRun: ptr.To(false),
		Options: runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}`)},
	})
}

// benchRequests are the bodies one benchmark cycles through.
type benchRequests struct {
	name   string
	bodies [][]byte
	// want checks a response.
	want func(*admissionv1.AdmissionResponse) error
}

func wantAllowed(warning bool) func(*admissionv1.AdmissionResponse) error {
	return func(r *admissionv1.AdmissionResponse) error {
		if !r.Allowed {
			return fmt.Errorf("denied: %+v", r.Result)
		}
		if warning != (len(r.Warnings) > 0) {
			return fmt.Errorf("warnings %q", r.Warnings)
		}
		return nil
	}
}

// benchCases: evictions of 1,000 pods (10 per set, every set), deletions
// of pod 0 of every set (each admitted one reserves that pod again: the
// store holds one reservation per set, a steady state), and an image
// change of every set.
func benchCases(tb testing.TB) []benchRequests {
	var ev, del, upd [][]byte
	for set := range benchSets {
		for i := 0; i < benchReplicas; i += 10 {
			ev = append(ev, evictionReview(tb, benchPod(set, i+set%10), fmt.Sprintf("ev-%d-%d", set, i), true))
		}
		del = append(del, deleteReview(tb, benchPod(set, 0), fmt.Sprintf("del-%d", set)))
		upd = append(upd, updateReview(tb, benchSet(set), fmt.Sprintf("upd-%d", set)))
	}
	return []benchRequests{
		{"eviction-dryrun", ev, wantAllowed(false)},
		{"delete", del, wantAllowed(false)},
		{"sts-update", upd, wantAllowed(true)},
	}
}

// serve is one request through the handler: decode, decide, encode.
func serve(g http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

func checkResponse(w *httptest.ResponseRecorder, want func(*admissionv1.AdmissionResponse) error) error {
	if w.Code != http.StatusOK {
		return fmt.Errorf("status %d: %s", w.Code, w.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		return err
	}
	if out.Response == nil {
		return fmt.Errorf("no response")
	}
	return want(out.Response)
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// BenchmarkReview times Gate.ServeHTTP on pre-encoded AdmissionReviews
// against an informer cache of 10,000 pods: decode, decision (capture of
// the workload from the cache, facts, policy, budgets, reservation) and
// encode, with the decision log and metrics. Besides ns/op it reports the
// p50 and p99 of the per-request times (µs), and the process's CPU time
// per request (all cores: the garbage collector's work included). Engines:
// the default strategy in Rego and native, and rego-constant
// (testdata/policies/constant), whose every answer is a constant: the
// floor of any Rego policy.
//
//	go test ./gate -run '^$' -bench BenchmarkReview -benchtime 2000x -benchmem
func BenchmarkReview(b *testing.B) {
	c := benchFixture(b)
	b.Logf("fixture: %d pods in %d StatefulSets, %d nodes; cache built in %s", benchSets*benchReplicas, benchSets, benchNodes, benchBuiltIn.Round(time.Millisecond))
	cases := benchCases(b)
	engines := []struct {
		name string
		e    engine.Engine
	}{
		{"rego", benchRego(b)},
		{"native", native.New()},
		// The floor of any Rego policy: constant answers, one call per pod.
		{"rego-constant", benchRego(b, "../testdata/policies/constant")},
	}
	for _, ne := range engines {
		e := ne.e
		for _, tc := range cases {
			b.Run(ne.name+"/"+tc.name, func(b *testing.B) {
				g := benchGate(b, c, e)
				for _, body := range tc.bodies[:min(len(tc.bodies), 20)] { // check, and warm up
					if err := checkResponse(serve(g, body), tc.want); err != nil {
						b.Fatal(err)
					}
				}
				took := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := measure.CPU()
				for i := 0; b.Loop(); i++ {
					body := tc.bodies[i%len(tc.bodies)]
					start := time.Now()
					w := serve(g, body)
					took = append(took, time.Since(start))
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((measure.CPU()-cpu0).Microseconds())/float64(len(took)), "cpu-µs/op")
				slices.Sort(took)
				b.ReportMetric(float64(percentile(took, 50).Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(percentile(took, 99).Nanoseconds())/1e3, "p99-µs")
				b.ReportMetric(float64(len(tc.bodies[0])), "req-bytes")
			})
		}
	}
}
