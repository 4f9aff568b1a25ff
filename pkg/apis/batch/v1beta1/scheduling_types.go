package v1beta1

// This file holds spec.scheduling, which every kind has (Lifecycle): how the job's pods are
// placed together by kube-scheduler, through the job's PodGroup (scheduling.k8s.io/v1beta1).
// It has the shape of batch/v1 Job's spec.scheduling (Kubernetes 1.37,
// JobSchedulingConfiguration), field for field, so that a user who knows one knows the other;
// the types are the project's own, since Kubernetes' are alpha. docs/gang.md says what each
// field does to the job's PodGroup and pods.

// SchedulingConfiguration places the job's pods together: the job gets a PodGroup
// (scheduling.k8s.io/v1beta1) that its replicas join, except a launcher, which is made only
// once the workers are Ready. It needs the cluster's GenericWorkload feature gate, and more
// for topology and resource claims (docs/gang.md). It cannot be added or removed once the
// job exists, and only schedulingPolicy.gang.minCount may change in it.
// +kubebuilder:validation:XValidation:rule="has(self.schedulingPolicy) == has(oldSelf.schedulingPolicy) && (!has(self.schedulingPolicy) || has(self.schedulingPolicy.gang) == has(oldSelf.schedulingPolicy.gang))",message="spec.scheduling.schedulingPolicy cannot be added, removed or switched between basic and gang once the job exists; only schedulingPolicy.gang.minCount may change: create a new job instead"
// +kubebuilder:validation:XValidation:rule="has(self.schedulingConstraints) == has(oldSelf.schedulingConstraints) && (!has(self.schedulingConstraints) || self.schedulingConstraints == oldSelf.schedulingConstraints)",message="spec.scheduling.schedulingConstraints cannot change once the job exists: its PodGroup was made with them; create a new job instead"
// +kubebuilder:validation:XValidation:rule="has(self.disruptionMode) == has(oldSelf.disruptionMode) && (!has(self.disruptionMode) || self.disruptionMode == oldSelf.disruptionMode)",message="spec.scheduling.disruptionMode cannot change once the job exists: its PodGroup was made with it; create a new job instead"
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaims) == has(oldSelf.resourceClaims) && (!has(self.resourceClaims) || self.resourceClaims == oldSelf.resourceClaims)",message="spec.scheduling.resourceClaims cannot change once the job exists: its PodGroup and pods were made with them; create a new job instead"
type SchedulingConfiguration struct {
	// SchedulingPolicy says how the PodGroup's pods are placed: gang (all or nothing) or
	// basic (one by one). Exactly one of the two. Without it the job is a gang of the
	// default minCount, unlike a batch Job, whose default is basic: a topology constraint
	// keeps a basic group in the domain its first pod was placed in, chosen before the
	// job's other pods were made, where the others may not fit. It cannot be added or
	// removed once the job exists, nor switched between basic and gang; gang.minCount may
	// change (the PodGroup is then made again).
	// +optional
	SchedulingPolicy *PodGroupSchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// SchedulingConstraints keeps the job's pods in one topology domain (one rack, one
	// block): kube-scheduler places the group only where all its pods fit in a domain. It
	// needs the TopologyAwareWorkloadScheduling feature gate (alpha in Kubernetes 1.37). It
	// cannot change once the job exists.
	// +optional
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`

	// DisruptionMode says whether the job's pods may be disrupted (preempted) one by one
	// (single, the default) or only all together (all): with all, kube-scheduler preempts
	// every pod of the group when it preempts one, rather than leave a gang that cannot
	// run. It cannot change once the job exists.
	// +optional
	DisruptionMode *PodGroupDisruptionMode `json:"disruptionMode,omitempty"`

	// ResourceClaims are device claims (dynamic resource allocation) shared by the job's
	// pods: the PodGroup holds each claim, one ResourceClaim for the whole group, and every
	// pod of the group gets an entry of the same name and source in its spec.resourceClaims,
	// so that its containers can use the devices by that name (resources.claims). A pod
	// template that already has a claim of that name must give it the same source. At most
	// 4. It needs the DRAWorkloadResourceClaims feature gate (beta, off by default, in
	// Kubernetes 1.37). It cannot change once the job exists.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	ResourceClaims []PodGroupResourceClaim `json:"resourceClaims,omitempty"`
}

// PodGroupSchedulingPolicy is how a PodGroup's pods are placed. Exactly one of basic and
// gang.
// +kubebuilder:validation:XValidation:rule="has(self.basic) != has(self.gang)",message="spec.scheduling.schedulingPolicy must set exactly one of basic ({}: the pods placed one by one) and gang (all or nothing, with an optional minCount)"
type PodGroupSchedulingPolicy struct {
	// Basic places the pods one by one, as without a PodGroup; the group still carries the
	// job's topology constraint, disruption mode and resource claims.
	// +optional
	Basic *BasicSchedulingPolicy `json:"basic,omitempty"`

	// Gang places the pods all or nothing: kube-scheduler binds none until it can bind
	// minCount of them.
	// +optional
	Gang *GangSchedulingPolicy `json:"gang,omitempty"`
}

// BasicSchedulingPolicy places pods one by one. It has no fields.
type BasicSchedulingPolicy struct{}

// GangSchedulingPolicy places pods all or nothing.
type GangSchedulingPolicy struct {
	// MinCount is how many of the group's pods must be placeable together before any is
	// bound. Defaults to every pod of the group: every replica made at once (a launcher,
	// made only once the workers are Ready, is outside the group). A minCount larger than
	// that fails the job. It may change while the job exists; the PodGroup is then made
	// again.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="spec.scheduling.schedulingPolicy.gang.minCount must be at least 1: it is how many pods must fit together before any is bound; leave it out for all the job's pods"
	MinCount *int32 `json:"minCount,omitempty"`
}

// PodGroupSchedulingConstraints are constraints on where a PodGroup's pods go.
type PodGroupSchedulingConstraints struct {
	// Topology keeps all the group's pods in one domain of a node label: the nodes that
	// share that label's value. At most one constraint.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	Topology []TopologyConstraint `json:"topology,omitempty"`
}

// TopologyConstraint is one topology domain the pods must share.
type TopologyConstraint struct {
	// Key is the node label whose value names the domain, e.g. topology.kubernetes.io/rack
	// or a label of the cluster's own; nodes without the label are not used. It must be a
	// valid label key.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="spec.scheduling.schedulingConstraints.topology[*].key must be a valid label key, such as topology.kubernetes.io/rack: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Key string `json:"key"`
}

// PodGroupDisruptionMode says how a PodGroup's pods may be disrupted. Exactly one of
// single and all.
// +kubebuilder:validation:XValidation:rule="has(self.single) != has(self.all)",message="spec.scheduling.disruptionMode must set exactly one of single ({}: pods disrupted one by one) and all ({}: all pods together)"
type PodGroupDisruptionMode struct {
	// Single lets kube-scheduler disrupt (preempt) the pods one by one.
	// +optional
	Single *SingleDisruptionMode `json:"single,omitempty"`

	// All lets kube-scheduler disrupt (preempt) the pods only all together.
	// +optional
	All *AllDisruptionMode `json:"all,omitempty"`
}

// SingleDisruptionMode disrupts pods one by one. It has no fields.
type SingleDisruptionMode struct{}

// AllDisruptionMode disrupts all pods of the group together. It has no fields.
type AllDisruptionMode struct{}

// PodGroupResourceClaim is a device claim shared by a PodGroup's pods. Exactly one of
// resourceClaimName and resourceClaimTemplateName.
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaimName) != has(self.resourceClaimTemplateName)",message="spec.scheduling.resourceClaims[*] must set exactly one of resourceClaimName (an existing ResourceClaim) and resourceClaimTemplateName (a ResourceClaimTemplate, from which one claim is made for the job's PodGroup)"
type PodGroupResourceClaim struct {
	// Name names the claim in the PodGroup and in every pod's spec.resourceClaims, where
	// containers refer to it (resources.claims[*].name). It must be a DNS label, unique in
	// the list.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="spec.scheduling.resourceClaims[*].name must be a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// ResourceClaimName is an existing ResourceClaim in the job's namespace, shared by the
	// job's pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="spec.scheduling.resourceClaims[*].resourceClaimName must be a DNS subdomain: the name of a ResourceClaim in the job's namespace"
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`

	// ResourceClaimTemplateName is a ResourceClaimTemplate in the job's namespace: one
	// ResourceClaim is made from it for the job's PodGroup (by kube-controller-manager), and
	// shared by the job's pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="spec.scheduling.resourceClaims[*].resourceClaimTemplateName must be a DNS subdomain: the name of a ResourceClaimTemplate in the job's namespace"
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}
