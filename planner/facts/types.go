// Package facts turns a snapshot into one normalised document per workload
// rollout: the input every policy engine sees. The schema is an API: fields are
// added, never renamed. Version: SchemaVersion. Documented in docs/policy-contract.md.
package facts

// SchemaVersion names the facts schema. Policies may check it.
const SchemaVersion = "rollplan.dev/facts/v1"

// Rollout is the policy input for one workload.
type Rollout struct {
	SchemaVersion string `json:"schemaVersion"`
	// Now is the snapshot time (RFC 3339), from --now or the snapshot.
	Now string `json:"now"`
	// KubernetesVersion is the minor version of the cluster the rollout
	// is planned for ("v1.37"): the default strategy predicts that
	// version's controllers.
	KubernetesVersion string `json:"kubernetesVersion"`
	// FeatureGates holds the cluster feature gates that change upstream
	// rollout behaviour (MaxUnavailableStatefulSet,
	// StatefulSetRecreateStrategy on v1.37+): the version's defaults with
	// --feature-gates applied.
	FeatureGates map[string]bool `json:"featureGates"`
	Workload     Workload        `json:"workload"`
	// Pods are the workload's pods, sorted by name.
	Pods []Pod `json:"pods"`
	// ReplicaSets (Deployment only), oldest first.
	ReplicaSets []ReplicaSet `json:"replicaSets"`
	// Nodes (DaemonSet only): every node, with whether it should run the pod.
	Nodes []Node `json:"nodes"`
	// PDBs that select at least one of the pods.
	PDBs []PDB `json:"pdbs"`
	// Revisions: each revision that pods still run, other than the update
	// revision, with the changes every pod of it shares (pods whose revision
	// is not in the snapshot are left out: their changes are their own).
	// Policies may decide per revision instead of per pod.
	Revisions []Revision `json:"revisions"`
	// Warnings found while building the facts (reported in the plan).
	Warnings []string `json:"warnings"`
	// Analysis: the wave the analysis decision point judges and what was
	// measured over it; wave 0 (the zero value) when none is judged.
	Analysis Analysis `json:"analysis"`
}

// Workload describes the rolling object.
type Workload struct {
	Kind        string            `json:"kind"` // Deployment | StatefulSet | DaemonSet
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	// Replicas is spec.replicas (defaulted to 1); for a DaemonSet, the number
	// of nodes that should run the pod (upstream desiredNumberScheduled).
	Replicas        int      `json:"replicas"`
	MinReadySeconds int      `json:"minReadySeconds"`
	Strategy        Strategy `json:"strategy"`
	// PodManagementPolicy (StatefulSet): OrderedReady | Parallel; "" otherwise.
	PodManagementPolicy string `json:"podManagementPolicy"`
	// ProgressDeadlineSeconds: the Deployment's field (600 by default); 600
	// for the other kinds unless the annotation rollplan.dev/progress-deadline-seconds says otherwise.
	ProgressDeadlineSeconds int  `json:"progressDeadlineSeconds"`
	Paused                  bool `json:"paused"`
	// Managed: annotation rollplan.dev/managed="true".
	Managed bool `json:"managed"`
	// PodUpdatePolicy: Recreate | InPlaceIfPossible | InPlaceOnly
	// (annotation rollplan.dev/pod-update-policy, default Recreate).
	PodUpdatePolicy string `json:"podUpdatePolicy"`
	// CurrentRevision and UpdateRevision: ReplicaSet names (Deployment) or
	// ControllerRevision names (StatefulSet, DaemonSet).
	CurrentRevision string `json:"currentRevision"`
	UpdateRevision  string `json:"updateRevision"`
	// OrdinalsStart (StatefulSet): spec.ordinals.start.
	OrdinalsStart int `json:"ordinalsStart"`
	// Policy: annotation rollplan.dev/policy, "" for the default.
	Policy string `json:"policy"`
}

// Strategy is the workload's update strategy after defaulting, with the
// rollplan annotations applied where the native strategy has no field.
type Strategy struct {
	// Type: RollingUpdate | Recreate | OnDelete.
	Type string `json:"type"`
	// MaxSurge and MaxUnavailable: an int or a "N%" string, validated; nil
	// when the kind or strategy has none.
	MaxSurge       any `json:"maxSurge"`
	MaxUnavailable any `json:"maxUnavailable"`
	// MaxUnavailableSource names where MaxUnavailable came from: a field
	// path or an annotation, that name with DefaultSuffix when it is unset
	// and MaxUnavailable is its default, or "default".
	MaxUnavailableSource string `json:"maxUnavailableSource"`
	MaxSurgeSource       string `json:"maxSurgeSource"`
	// Partition (StatefulSet): 0 when unset.
	Partition       int    `json:"partition"`
	PartitionSource string `json:"partitionSource"`
	// RollingUpdateSet (StatefulSet): spec.updateStrategy.rollingUpdate is non-nil.
	RollingUpdateSet bool `json:"rollingUpdateSet"`
}

// Pod is one pod of the workload at snapshot time.
type Pod struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Revision: the pod's pod-template-hash (Deployment, as the ReplicaSet
	// name) or controller-revision-hash (as the ControllerRevision name).
	Revision string `json:"revision"`
	// Updated: the pod runs the update revision.
	Updated bool `json:"updated"`
	// Ordinal (StatefulSet): parsed from the name; -1 for other kinds.
	Ordinal int `json:"ordinal"`
	// Index (StatefulSet): ordinal − ordinals.start; -1 for other kinds.
	Index int    `json:"index"`
	Node  string `json:"node"`
	// Zone: the node's topology.kubernetes.io/zone label, "" if unknown.
	Zone      string `json:"zone"`
	Phase     string `json:"phase"`
	Scheduled bool   `json:"scheduled"`
	Ready     bool   `json:"ready"`
	// ReadySeconds: seconds since the Ready condition turned True; -1 when not
	// Ready or when the transition time is unknown.
	ReadySeconds int64 `json:"readySeconds"`
	// Available: Ready for at least minReadySeconds (inclusive) at Now.
	Available bool `json:"available"`
	// UnavailableSeconds: how long the pod has not been available (since its
	// creation or its last Ready transition); 0 when available.
	UnavailableSeconds int64 `json:"unavailableSeconds"`
	Terminating        bool  `json:"terminating"`
	// Terminal: phase Succeeded or Failed.
	Terminal bool `json:"terminal"`
	// Restarts: the highest restartCount among the containers (for a pod
	// updated in place by rollplan: restarts since that update, not
	// counting the restart the update itself causes);
	// SidecarRestarts: the same among restartable init containers.
	Restarts        int `json:"restarts"`
	SidecarRestarts int `json:"sidecarRestarts"`
	// Owner: the owning ReplicaSet (Deployment) or the workload name.
	Owner  string            `json:"owner"`
	Labels map[string]string `json:"labels"`
	// DeletionCost: annotation controller.kubernetes.io/pod-deletion-cost (0 if absent or invalid).
	DeletionCost int `json:"deletionCost"`
	// Colocated: active pods of the workload on the same node, this one
	// included (upstream's ReplicaSet deletion "rank").
	Colocated int `json:"colocated"`
	// ReadyBucket and CreatedBucket: floor(log2(Now − t in ns)), the buckets
	// upstream's LogarithmicScaleDown compares; -2 when the time is unknown
	// (upstream counts a zero time as the most recent), -1 when t ≥ Now.
	ReadyBucket   int `json:"readyBucket"`
	CreatedBucket int `json:"createdBucket"`
	// Changes: template fields that differ between the pod's revision and the
	// update revision. Empty when the pod is updated.
	Changes []Change `json:"changes"`
	// PDBs: names of the PodDisruptionBudgets selecting this pod.
	PDBs []string `json:"pdbs"`
}

// Revision is a pod revision and its changes towards the update revision.
type Revision struct {
	Name    string   `json:"name"`
	Changes []Change `json:"changes"`
}

// Change classes.
const (
	ClassImage       = "image"
	ClassInitImage   = "initImage"
	ClassResources   = "resources"
	ClassEnv         = "env"
	ClassCommand     = "command"
	ClassArgs        = "args"
	ClassLabels      = "labels"
	ClassAnnotations = "annotations"
	ClassOther       = "other"
)

// Change is one template field that differs.
type Change struct {
	// Path, e.g. spec.containers[app].image or metadata.labels.
	Path  string `json:"path"`
	Class string `json:"class"`
	// InPlace: the API lets a running pod take this change: an image, a
	// label or annotation (except the mirror-pod and AppArmor keys), or a
	// cpu/memory resize through pods/resize that keeps the QoS class.
	InPlace bool `json:"inPlace"`
	// Detail says why a change cannot go in place, when it cannot.
	Detail string `json:"detail"`
}

// ReplicaSet is a Deployment's ReplicaSet.
type ReplicaSet struct {
	Name              string `json:"name"`
	Hash              string `json:"hash"`
	Revision          int    `json:"revision"`
	Replicas          int    `json:"replicas"`
	AvailableReplicas int    `json:"availableReplicas"`
	MinReadySeconds   int    `json:"minReadySeconds"`
	// New: the ReplicaSet whose template equals the Deployment's.
	New     bool   `json:"new"`
	Created string `json:"created"`
	// Pods: how many active (non-terminating) pods the snapshot holds for it.
	Pods int `json:"pods"`
}

// Node is a node, as a DaemonSet sees it.
type Node struct {
	Name string `json:"name"`
	Zone string `json:"zone"`
	// ShouldRun: nodeSelector, required affinity and NoSchedule/NoExecute
	// taints allow a new daemon pod; ShouldContinueRunning: no untolerated
	// NoExecute taint (upstream NodeShouldRunDaemonPod).
	ShouldRun             bool `json:"shouldRun"`
	ShouldContinueRunning bool `json:"shouldContinueRunning"`
	// Pods: non-terminating daemon pods bound to the node.
	Pods int `json:"pods"`
	// Unschedulable: spec.unschedulable (the node is cordoned).
	Unschedulable bool `json:"unschedulable"`
	// CordonedBy: annotation rollplan.dev/cordoned-by, the DaemonSet
	// ("namespace/name") rollplan cordoned the node for; "" when absent.
	CordonedBy string `json:"cordonedBy"`
	// DrainPods: the pods of the snapshot a drain of the node would evict
	// ("namespace/name", sorted): bound to it, not owned by a DaemonSet,
	// not mirror pods, neither terminating nor finished. A snapshot may
	// not hold every pod of the node.
	DrainPods []string `json:"drainPods"`
	// MaintenancePlanned, MaintenanceInProgress: the node reports the
	// condition of that type (Kubernetes v1.37 node lifecycle vocabulary,
	// written by the cluster's admin or their tools) with status True.
	// The default strategy ignores them, as upstream controllers do; a
	// policy may hold the node's pods.
	MaintenancePlanned    bool `json:"maintenancePlanned"`
	MaintenanceInProgress bool `json:"maintenanceInProgress"`
}

// PDB is a PodDisruptionBudget selecting some of the pods.
type PDB struct {
	Name string `json:"name"`
	// MaxUnavailable: how many selected pods may be unavailable at once,
	// resolved from spec.minAvailable or spec.maxUnavailable against the
	// expected pod count (upstream disruption controller rounding: up).
	MaxUnavailable int `json:"maxUnavailable"`
	ExpectedPods   int `json:"expectedPods"`
	// UnavailableElsewhere: selected pods of other workloads that are unavailable now.
	UnavailableElsewhere int    `json:"unavailableElsewhere"`
	Source               string `json:"source"`
}
