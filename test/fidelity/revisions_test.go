package fidelity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	snapcapture "github.com/rollplan/rollplan/planner/snapshot/capture"
	"github.com/rollplan/rollplan/test/controlplane"
)

// TestRevisionNames proves, on each control plane, that the facts name the
// revision a controller is about to make: the new ReplicaSet of a
// Deployment, the ControllerRevision of a DaemonSet (both named by hashing
// the pod template's Go struct dump, which changes with the k8s.io/api
// structs of the version) and of a StatefulSet (a hash of the template's
// JSON). The controllers are frozen, the workloads created or changed, the
// namespace captured and its facts built for the control plane's version;
// then the controllers run and the names they chose are compared.
func TestRevisionNames(t *testing.T) {
	versions, err := controlplane.Versions()
	if err != nil {
		t.Skip(err)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) { testRevisionNames(t, v) })
	}
}

func testRevisionNames(t *testing.T, version string) {
	kv, err := kubeversion.Parse(version)
	if err != nil {
		t.Skipf("rollplan does not plan for the control plane %s: %v", version, err)
	}
	cp := cluster(t, run{version: version})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := cp.Client
	const ns = "revision-names"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet: the controllers name revisions whether or not a pod
	// ever runs.
	objects := []any{
		testobj.Deployment(ns, "web").Template(realisticTemplate("web", imageV1)).Selector(selectorFor("web")).Replicas(2).Obj(),
		testobj.DaemonSet(ns, "agent").Template(realisticTemplate("agent", imageV1)).Selector(selectorFor("agent")).Obj(),
		testobj.StatefulSet(ns, "db").Template(realisticTemplate("db", imageV1)).Selector(selectorFor("db")).Replicas(2).ServiceName("db").Obj(),
	}
	var failures []string
	for _, phase := range []string{"create", "template change"} {
		if err := cp.PauseControllers(); err != nil {
			t.Fatal(err)
		}
		for _, obj := range objects {
			var err error
			switch o := obj.(type) {
			case *appsv1.Deployment:
				if phase == "create" {
					_, err = c.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
				} else {
					err = (&env{c: c, ns: ns, name: o.Name}).mutate(ctx, "Deployment", changeTemplate)
				}
			case *appsv1.DaemonSet:
				if phase == "create" {
					_, err = c.AppsV1().DaemonSets(ns).Create(ctx, o, metav1.CreateOptions{})
				} else {
					err = (&env{c: c, ns: ns, name: o.Name}).mutate(ctx, "DaemonSet", changeTemplate)
				}
			case *appsv1.StatefulSet:
				if phase == "create" {
					_, err = c.AppsV1().StatefulSets(ns).Create(ctx, o, metav1.CreateOptions{})
				} else {
					err = (&env{c: c, ns: ns, name: o.Name}).mutate(ctx, "StatefulSet", changeTemplate)
				}
			}
			if err != nil {
				_ = cp.ResumeControllers()
				t.Fatalf("%s %T: %v", phase, obj, err)
			}
		}
		snap, _, err := snapcapture.Capture(ctx, c, snapcapture.Options{Namespace: ns})
		if err != nil {
			_ = cp.ResumeControllers()
			t.Fatalf("%s: capture: %v", phase, err)
		}
		rollouts, err := facts.Build(snap, facts.Options{Now: time.Now(), KubernetesVersion: kv})
		if err != nil {
			_ = cp.ResumeControllers()
			t.Fatalf("%s: facts for %s: %v", phase, kv, err)
		}
		predicted := map[string]string{}
		for _, r := range rollouts {
			predicted[r.Workload.Kind+"/"+r.Workload.Name] = r.Workload.UpdateRevision
		}
		if err := cp.ResumeControllers(); err != nil {
			t.Fatal(err)
		}
		made, err := madeRevisions(ctx, cp, ns)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		for _, key := range []string{"Deployment/web", "DaemonSet/agent", "StatefulSet/db"} {
			what := map[string]string{"Deployment": "new ReplicaSet", "DaemonSet": "ControllerRevision", "StatefulSet": "update revision"}[strings.Split(key, "/")[0]]
			got, want := made[key], predicted[key]
			t.Logf("%s, %s: %s %s, facts %s", phase, key, what, got, want)
			if got != want {
				failures = append(failures, fmt.Sprintf("%s %s: kube-controller-manager %s named its %s %s; the facts for %s predict %s",
					phase, key, cp.ServerVersion, what, got, kv, want))
			}
		}
	}
	if len(failures) > 0 {
		t.Errorf("revision names on Kubernetes %s:\n  %s\n(ReplicaSet and DaemonSet revisions hash the spew dump of the pod template as that version's k8s.io/api structs print it, facts.ComputeHash; StatefulSet revisions hash the template's JSON)",
			kv, strings.Join(failures, "\n  "))
	}
}

func selectorFor(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// changeTemplate: a new image, an environment variable and a readiness
// probe's period.
func changeTemplate(obj any) {
	var t *corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		t = &o.Spec.Template
	case *appsv1.DaemonSet:
		t = &o.Spec.Template
	case *appsv1.StatefulSet:
		t = &o.Spec.Template
	}
	c := &t.Spec.Containers[0]
	c.Image = imageV2
	c.Env = append(c.Env, corev1.EnvVar{Name: "FEATURE_X", Value: "on"})
	c.ReadinessProbe.PeriodSeconds = 7
}

// realisticTemplate has what production templates have, so that the
// structs whose fields differ between Kubernetes versions appear in the
// hash: probes of every handler, volumes of several sources (secret,
// config map with items, projected token and downward API, empty dir),
// mounts, resources, a security context, affinity and tolerations.
func realisticTemplate(app, image string) corev1.PodTemplateSpec {
	port := intstr.FromString("http")
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": app, "tier": "backend"},
			Annotations: map[string]string{"example.com/config-checksum": "3f2a9c"},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](2000)},
			Tolerations:                   []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "backend", Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: selectorFor(app), TopologyKey: "kubernetes.io/hostname"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"},
					Items:                []corev1.KeyToPath{{Key: "app.yaml", Path: "app.yaml", Mode: ptr.To[int32](0o440)}},
					DefaultMode:          ptr.To[int32](0o444)}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: app + "-tls", Optional: ptr.To(true)}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
				{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
				}}}},
			},
			InitContainers: []corev1.Container{{
				Name: "migrate", Image: image, Command: []string{"/app", "migrate"},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app", ReadOnly: true}},
			}},
			Containers: []corev1.Container{{
				Name:  "app",
				Image: image,
				Args:  []string{"--config=/etc/app/app.yaml"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "grpc", ContainerPort: 9090}},
				Env: []corev1.EnvVar{
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/app", ReadOnly: true},
					{Name: "tls", MountPath: "/etc/tls", ReadOnly: true},
					{Name: "cache", MountPath: "/var/cache/app", SubPath: "v1"},
					{Name: "identity", MountPath: "/var/run/identity", ReadOnly: true},
				},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
					PeriodSeconds: 2, FailureThreshold: 30},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: ptr.To("health")}},
					PeriodSeconds: 10, TimeoutSeconds: 2},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: port,
					HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "ready"}}}}, PeriodSeconds: 5},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/app", "drain"}}}},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// madeRevisions waits until the controllers have acted on the workloads'
// current generation and returns, by Kind/name, the revision each made:
// the Deployment's ReplicaSet of its current revision, the DaemonSet's
// newest ControllerRevision, the StatefulSet's status.updateRevision.
func madeRevisions(ctx context.Context, cp *controlplane.ControlPlane, ns string) (map[string]string, error) {
	c := cp.Client
	made := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		clear(made)
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		sts, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration < d.Generation || ds.Status.ObservedGeneration < ds.Generation || sts.Status.ObservedGeneration < sts.Generation {
			return false, nil
		}
		rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rs := range rss.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID &&
				rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
				made["Deployment/web"] = rs.Name
			}
		}
		crs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var newest int64 = -1
		for _, cr := range crs.Items {
			if ref := metav1.GetControllerOf(&cr); ref != nil && ref.UID == ds.UID && cr.Revision > newest {
				newest, made["DaemonSet/agent"] = cr.Revision, cr.Name
			}
		}
		made["StatefulSet/db"] = sts.Status.UpdateRevision
		return made["Deployment/web"] != "" && made["DaemonSet/agent"] != "" && made["StatefulSet/db"] != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("the controllers of %s did not make the revisions (so far %v): %w", cp.Version, made, err)
	}
	return made, nil
}
