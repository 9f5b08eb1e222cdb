package change

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

func parseOne(t *testing.T, manifest string) *Object {
	t.Helper()
	objs, _, err := Parse("m.yaml", []byte(manifest), "")
	if err != nil || len(objs) != 1 {
		t.Fatalf("parse: %v (%d objects)", err, len(objs))
	}
	return objs[0]
}

// The reference's computed value (k8s-rollout-semantics §1.5.1): the
// template {labels app=nginx; containers [{nginx, nginx:1.25}]} after
// SetObjectDefaults_Deployment hashes to 7cd5cff77d with the v1.36
// structs and no collision count. Only the exact upstream defaulting of
// every template field gives that name.
func TestDefaultDeploymentMatchesReferenceHash(t *testing.T) {
	o := parseOne(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx}
spec:
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: "nginx:1.25"}]}
`)
	d := o.Obj.(*appsv1.Deployment)
	v136, err := kubeversion.Parse("v1.36")
	if err != nil {
		t.Fatal(err)
	}
	if got := facts.ComputeHash(&d.Spec.Template, nil, v136); got != "6f5c8fdd6d" {
		t.Fatalf("undefaulted template hashes to %s, want the reference's 6f5c8fdd6d", got)
	}
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	if got := facts.ComputeHash(&d.Spec.Template, nil, v136); got != "7cd5cff77d" {
		t.Errorf("defaulted template hashes to %s, want the reference's 7cd5cff77d", got)
	}
}

// Field by field, against upstream's defaulters.
func TestDefault(t *testing.T) {
	o := parseOne(t, `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  volumeClaimTemplates: [{metadata: {name: data}, spec: {resources: {requests: {storage: 1.5Gi}}}}]
  template:
    metadata: {labels: {app: db}}
    spec:
      serviceAccount: legacy
      initContainers: [{name: init, image: "busybox"}]
      containers:
      - name: db
        image: "registry.example/db@sha256:0123456789012345678901234567890123456789012345678901234567890123"
        ports: [{containerPort: 5432}]
        env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
        resources: {limits: {cpu: "0.0001", memory: 1Gi}}
        livenessProbe: {httpGet: {port: 5432}}
        readinessProbe: {grpc: {port: 5433}, periodSeconds: 5}
        lifecycle: {preStop: {httpGet: {port: 8080, path: /stop}}}
      - {name: tools, image: "tools:latest"}
      volumes:
      - {name: scratch}
      - {name: conf, configMap: {name: c}}
      - {name: sec, secret: {secretName: s}}
      - {name: host, hostPath: {path: /var}}
      - name: token
        projected: {sources: [{serviceAccountToken: {path: t}}, {downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}}]}
      - {name: eph, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}
`)
	if err := Default(o, map[string]bool{kubeversion.MaxUnavailableStatefulSet: true}); err != nil {
		t.Fatal(err)
	}
	s := o.Obj.(*appsv1.StatefulSet)
	p := &s.Spec.Template.Spec
	c, tools, init := p.Containers[0], p.Containers[1], p.InitContainers[0]
	vol := func(name string) corev1.VolumeSource {
		for _, v := range p.Volumes {
			if v.Name == name {
				return v.VolumeSource
			}
		}
		t.Fatalf("no volume %s", name)
		return corev1.VolumeSource{}
	}
	ru := s.Spec.UpdateStrategy.RollingUpdate
	for _, tc := range []struct {
		field     string
		got, want any
	}{
		{"spec.replicas", *s.Spec.Replicas, int32(1)},
		{"spec.podManagementPolicy", s.Spec.PodManagementPolicy, appsv1.OrderedReadyPodManagement},
		{"spec.updateStrategy.type", s.Spec.UpdateStrategy.Type, appsv1.RollingUpdateStatefulSetStrategyType},
		{"rollingUpdate.partition", *ru.Partition, int32(0)},
		{"rollingUpdate.maxUnavailable (gate on)", ru.MaxUnavailable.IntValue(), 1},
		{"spec.revisionHistoryLimit", *s.Spec.RevisionHistoryLimit, int32(10)},
		{"persistentVolumeClaimRetentionPolicy", *s.Spec.PersistentVolumeClaimRetentionPolicy, appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"}},
		{"volumeClaimTemplates status.phase", s.Spec.VolumeClaimTemplates[0].Status.Phase, corev1.ClaimPending},
		{"volumeClaimTemplates volumeMode", *s.Spec.VolumeClaimTemplates[0].Spec.VolumeMode, corev1.PersistentVolumeFilesystem},
		{"volumeClaimTemplates storage canonical", s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String(), "1536Mi"},
		{"dnsPolicy", p.DNSPolicy, corev1.DNSClusterFirst},
		{"restartPolicy", p.RestartPolicy, corev1.RestartPolicyAlways},
		{"schedulerName", p.SchedulerName, "default-scheduler"},
		{"securityContext", *p.SecurityContext, corev1.PodSecurityContext{}},
		{"terminationGracePeriodSeconds", *p.TerminationGracePeriodSeconds, int64(30)},
		{"serviceAccountName from serviceAccount", p.ServiceAccountName, "legacy"},
		{"imagePullPolicy, digest without tag", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"imagePullPolicy, no tag", init.ImagePullPolicy, corev1.PullAlways},
		{"imagePullPolicy, latest", tools.ImagePullPolicy, corev1.PullAlways},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", init.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"env fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"cpu rounded up to milli", c.Resources.Limits.Cpu().String(), "1m"},
		{"liveness probe", [4]int32{c.LivenessProbe.TimeoutSeconds, c.LivenessProbe.PeriodSeconds, c.LivenessProbe.SuccessThreshold, c.LivenessProbe.FailureThreshold}, [4]int32{1, 10, 1, 3}},
		{"httpGet path and scheme", [2]string{c.LivenessProbe.HTTPGet.Path, string(c.LivenessProbe.HTTPGet.Scheme)}, [2]string{"/", "HTTP"}},
		{"readiness period kept", c.ReadinessProbe.PeriodSeconds, int32(5)},
		{"grpc service", *c.ReadinessProbe.GRPC.Service, ""},
		{"preStop httpGet scheme", c.Lifecycle.PreStop.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"no source: emptyDir", vol("scratch").EmptyDir != nil, true},
		{"configMap defaultMode", *vol("conf").ConfigMap.DefaultMode, int32(0o644)},
		{"secret defaultMode", *vol("sec").Secret.DefaultMode, int32(0o644)},
		{"hostPath type", *vol("host").HostPath.Type, corev1.HostPathUnset},
		{"projected defaultMode", *vol("token").Projected.DefaultMode, int32(0o644)},
		{"serviceAccountToken expiration", *vol("token").Projected.Sources[0].ServiceAccountToken.ExpirationSeconds, int64(3600)},
		{"projected downwardAPI fieldRef", vol("token").Projected.Sources[1].DownwardAPI.Items[0].FieldRef.APIVersion, "v1"},
		{"ephemeral volumeMode", *vol("eph").Ephemeral.VolumeClaimTemplate.Spec.VolumeMode, corev1.PersistentVolumeFilesystem},
	} {
		if !equality.Semantic.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.field, tc.got, tc.want)
		}
	}
}

// The StatefulSet strategy edge of §4.1: an explicit RollingUpdate without
// a rollingUpdate block stays without one; with the gate off no
// maxUnavailable is added. Deployment and DaemonSet strategies default.
func TestDefaultStrategies(t *testing.T) {
	o := parseOne(t, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {updateStrategy: {type: RollingUpdate}}\n")
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	if ru := o.Obj.(*appsv1.StatefulSet).Spec.UpdateStrategy.RollingUpdate; ru != nil {
		t.Errorf("explicit RollingUpdate got a rollingUpdate block %+v", ru)
	}
	o = parseOne(t, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n")
	if err := Default(o, map[string]bool{kubeversion.MaxUnavailableStatefulSet: false}); err != nil {
		t.Fatal(err)
	}
	if ru := o.Obj.(*appsv1.StatefulSet).Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxUnavailable != nil || *ru.Partition != 0 {
		t.Errorf("gate off: rollingUpdate %+v, want partition 0 and no maxUnavailable", ru)
	}
	o = parseOne(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	d := o.Obj.(*appsv1.Deployment)
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment strategy %+v, progressDeadlineSeconds %d", d.Spec.Strategy, *d.Spec.ProgressDeadlineSeconds)
	}
	o = parseOne(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {strategy: {type: Recreate}}\n")
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	if ru := o.Obj.(*appsv1.Deployment).Spec.Strategy.RollingUpdate; ru != nil {
		t.Errorf("Recreate got a rollingUpdate block %+v", ru)
	}
	o = parseOne(t, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n")
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	if ru := o.Obj.(*appsv1.DaemonSet).Spec.UpdateStrategy.RollingUpdate; ru.MaxUnavailable.IntValue() != 1 || ru.MaxSurge.IntValue() != 0 || ru.MaxSurge.Type != 0 {
		t.Errorf("daemonset rollingUpdate %+v, want maxUnavailable 1, maxSurge 0 (ints)", ru)
	}
}

func TestPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"nginx":                 corev1.PullAlways,
		"nginx:latest":          corev1.PullAlways,
		"nginx:1.25":            corev1.PullIfNotPresent,
		"localhost:5000/app":    corev1.PullAlways,
		"localhost:5000/app:v1": corev1.PullIfNotPresent,
		"app:latest@sha256:0123456789012345678901234567890123456789012345678901234567890123": corev1.PullAlways,
		"NotValid:x": corev1.PullIfNotPresent,
		"":           corev1.PullIfNotPresent,
	} {
		if got := pullPolicy(image); got != want {
			t.Errorf("pullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}
