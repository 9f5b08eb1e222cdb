package change

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

// The API server's defaulting of the three workloads, reproduced: this
// module cannot import k8s.io/kubernetes, so the defaulters below follow
// upstream v1.37.2 function by function, each named in its comment:
//
//   - pkg/apis/apps/v1/defaults.go: SetDefaults_Deployment,
//     SetDefaults_StatefulSet, SetDefaults_DaemonSet;
//   - pkg/apis/apps/v1/zz_generated.defaults.go: SetObjectDefaults_Deployment,
//     SetObjectDefaults_StatefulSet, SetObjectDefaults_DaemonSet, which
//     call the core/v1 defaulters on the pod template in this order
//     (podSpec below) and hold the declarative (+default) ones inline;
//   - pkg/apis/core/v1/defaults.go: SetDefaults_PodSpec, SetDefaults_Container,
//     SetDefaults_Volume, SetDefaults_Probe, SetDefaults_HTTPGetAction, ...
//
// What the API server does beyond defaulting is not reproduced: mutating
// admission webhooks, LimitRanger (default requests and limits), PodSecurity
// and other admission plugins, and fields a newer server defaults. A live
// preview (server-side dry-run apply) has none of these gaps; docs/change.md
// says so. test/e2e TestChangeDefaultsMatchServer sends
// a table of manifests through the real API server's dry-run and compares.

// Default gives a proposed workload the API server's defaults, as a
// server of version v with feature gates (Kubernetes names, e.g.
// MaxUnavailableStatefulSet) would, then round-trips it through JSON so
// that it reads as the controllers read it from the API (quantities in
// canonical form: "0.5" is 500m).
func Default(o *Object, gates map[string]bool) error {
	switch w := o.Obj.(type) {
	case *appsv1.Deployment:
		setDefaultsDeployment(w)
		podTemplate(&w.Spec.Template.Spec, gates)
	case *appsv1.StatefulSet:
		setDefaultsStatefulSet(w, gates[kubeversion.MaxUnavailableStatefulSet])
		podTemplate(&w.Spec.Template.Spec, gates)
		// SetObjectDefaults_StatefulSet: spec.volumeClaimTemplates.
		for i := range w.Spec.VolumeClaimTemplates {
			c := &w.Spec.VolumeClaimTemplates[i]
			if c.Status.Phase == "" { // SetDefaults_PersistentVolumeClaim
				c.Status.Phase = corev1.ClaimPending
			}
			pvcSpec(&c.Spec)
			resourceList(c.Status.Capacity)
			resourceList(c.Status.AllocatedResources)
		}
	case *appsv1.DaemonSet:
		setDefaultsDaemonSet(w)
		podTemplate(&w.Spec.Template.Spec, gates)
	default:
		return fmt.Errorf("%s: cannot default a %T", o.ID(), o.Obj)
	}
	return roundTrip(o)
}

// roundTrip re-decodes the object from its JSON.
func roundTrip(o *Object) error {
	b, err := json.Marshal(o.Obj)
	if err != nil {
		return fmt.Errorf("%s: %w", o.ID(), err)
	}
	fresh := reflect.New(reflect.TypeOf(o.Obj).Elem()).Interface()
	if err := json.Unmarshal(b, fresh); err != nil {
		return fmt.Errorf("%s: %w", o.ID(), err)
	}
	reflect.ValueOf(o.Obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// setDefaultsDeployment is SetDefaults_Deployment.
func setDefaultsDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
}

// setDefaultsDaemonSet is SetDefaults_DaemonSet.
func setDefaultsDaemonSet(ds *appsv1.DaemonSet) {
	s := &ds.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
}

// setDefaultsStatefulSet is SetDefaults_StatefulSet; maxUnavailable is the
// MaxUnavailableStatefulSet gate.
func setDefaultsStatefulSet(set *appsv1.StatefulSet, maxUnavailable bool) {
	if set.Spec.PodManagementPolicy == "" {
		set.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	s := &set.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	// An explicit type RollingUpdate without a rollingUpdate block stays
	// without one (reference §4.1).
	if s.Type == appsv1.RollingUpdateStatefulSetStrategyType && s.RollingUpdate != nil {
		if s.RollingUpdate.Partition == nil {
			s.RollingUpdate.Partition = ptr.To[int32](0)
		}
		if maxUnavailable && s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
	}
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	if p == nil {
		p = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
		set.Spec.PersistentVolumeClaimRetentionPolicy = p
	}
	if p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if set.Spec.Replicas == nil {
		set.Spec.Replicas = ptr.To[int32](1)
	}
	if set.Spec.RevisionHistoryLimit == nil {
		set.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
}

// podTemplate is the pod-template part of SetObjectDefaults_Deployment
// (and of the StatefulSet's and DaemonSet's, which are the same).
func podTemplate(spec *corev1.PodSpec, gates map[string]bool) {
	podSpec(spec)
	for i := range spec.Volumes {
		volume(&spec.Volumes[i], gates)
	}
	for i := range spec.InitContainers {
		container(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		container(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		// SetDefaults_EphemeralContainer: SetDefaults_Container on the common part.
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		container(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	resourceList(spec.Overhead)
	if spec.Resources != nil {
		resourceList(spec.Resources.Limits)
		resourceList(spec.Resources.Requests)
	}
}

// podSpec is SetDefaults_PodSpec. (The host-network port defaulting of
// templates is behind DefaultHostNetworkHostPortsInPodTemplates, off.)
func podSpec(s *corev1.PodSpec) {
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount //nolint:staticcheck // upstream keeps the alias in sync
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName //nolint:staticcheck // as upstream
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
}

// volume is SetDefaults_Volume and the defaulters the generated code
// calls on each volume source.
func volume(v *corev1.Volume, gates map[string]bool) {
	if ptr.AllPtrFieldsNil(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	// SetDefaults_Volume, gate ImageVolume (beta, on from 1.35; not
	// tracked in kubeversion, so on unless --feature-gates says off).
	if on, set := gates["ImageVolume"]; (on || !set) && v.Image != nil && v.Image.PullPolicy == "" {
		v.Image.PullPolicy = pullPolicy(v.Image.Reference)
	}
	src := &v.VolumeSource
	if src.HostPath != nil && src.HostPath.Type == nil { // SetDefaults_HostPathVolumeSource
		src.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil { // SetDefaults_SecretVolumeSource
		src.Secret.DefaultMode = ptr.To[int32](corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" { // +default="default"
		src.ISCSI.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil { // +default markers
		if r.RBDPool == "" {
			r.RBDPool = "rbd"
		}
		if r.RadosUser == "" {
			r.RadosUser = "admin"
		}
		if r.Keyring == "" {
			r.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := src.DownwardAPI; d != nil { // SetDefaults_DownwardAPIVolumeSource
		if d.DefaultMode == nil {
			d.DefaultMode = ptr.To[int32](corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range d.Items {
			fieldSelector(d.Items[i].FieldRef)
		}
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil { // SetDefaults_ConfigMapVolumeSource
		src.ConfigMap.DefaultMode = ptr.To[int32](corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if a := src.AzureDisk; a != nil { // +default markers
		if a.CachingMode == nil {
			a.CachingMode = ptr.To(corev1.AzureDataDiskCachingReadWrite)
		}
		if a.FSType == nil {
			a.FSType = ptr.To("ext4")
		}
		if a.ReadOnly == nil {
			a.ReadOnly = ptr.To(false)
		}
		if a.Kind == nil {
			a.Kind = ptr.To(corev1.AzureSharedBlobDisk)
		}
	}
	if p := src.Projected; p != nil { // SetDefaults_ProjectedVolumeSource
		if p.DefaultMode == nil {
			p.DefaultMode = ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			s := &p.Sources[i]
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					fieldSelector(s.DownwardAPI.Items[j].FieldRef)
				}
			}
			// SetDefaults_ServiceAccountTokenProjection: an hour.
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
	if s := src.ScaleIO; s != nil { // +default markers
		if s.StorageMode == "" {
			s.StorageMode = "ThinProvisioned"
		}
		if s.FSType == "" {
			s.FSType = "xfs"
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		pvcSpec(&e.VolumeClaimTemplate.Spec)
	}
}

// pvcSpec is SetDefaults_PersistentVolumeClaimSpec with its resources.
func pvcSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		s.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	resourceList(s.Resources.Limits)
	resourceList(s.Resources.Requests)
}

// container is SetDefaults_Container and what the generated code does to
// a container's ports, env, resources, probes and lifecycle handlers.
func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" { // +default="TCP"
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil {
			fieldSelector(vf.FieldRef)
			if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil { // +default=false
				vf.FileKeyRef.Optional = ptr.To(false)
			}
		}
	}
	resourceList(c.Resources.Limits)
	resourceList(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		// SetDefaults_Probe
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		httpGet(p.HTTPGet)
		if p.GRPC != nil && p.GRPC.Service == nil { // +default=""
			p.GRPC.Service = ptr.To("")
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				httpGet(h.HTTPGet)
			}
		}
	}
}

// httpGet is SetDefaults_HTTPGetAction.
func httpGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// fieldSelector is SetDefaults_ObjectFieldSelector.
func fieldSelector(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// resourceList is SetDefaults_ResourceList: quantities rounded up to
// milli scale.
func resourceList(l corev1.ResourceList) {
	for k, v := range l {
		v.RoundUp(-3)
		l[k] = v
	}
}

// pullPolicy is the imagePullPolicy SetDefaults_Container gives an image:
// Always for the tag latest (written, or implied by no tag and no digest),
// else IfNotPresent, also when the name does not parse (as upstream, which
// parses with pkg/util/parsers ParseImageName: distribution/reference).
func pullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tag := ""
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	_, digested := named.(reference.Digested)
	if tag == "latest" || tag == "" && !digested {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}
