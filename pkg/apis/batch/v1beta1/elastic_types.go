package v1beta1

// ElasticPolicy lets one replica type of a job change its size while the job runs, between
// a minimum and a maximum (docs/elastic.md): the job starts with what there is, grows to
// replicas when more is free, and runs on when a replica of the type is lost while at least
// minReplicas remain. One type per job: the scale subresource, through which `kubectl scale`
// and autoscalers resize a job, reads and writes one fixed path, spec.elastic.replicas.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.elastic.minReplicas must not be more than spec.elastic.maxReplicas"
// +kubebuilder:validation:XValidation:rule="self.replicas >= self.minReplicas && self.replicas <= self.maxReplicas",message="spec.elastic.replicas is outside spec.elastic.minReplicas to maxReplicas: the job is resized within them only; choose a size between them, or change the bounds while the job is paused"
type ElasticPolicy struct {
	// ReplicaType names the elastic replica type: any type of a GenericJob, whose program
	// must take members that come and go (torchrun's elastic rendezvous, say).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	ReplicaType string `json:"replicaType"`

	// Replicas is the size the job asks for now: the type's own replicas field is left
	// out. `kubectl scale` writes it, and it may change at any time; the job grows to it, or
	// shrinks to it by removing the highest ranks first. status.elastic.replicas says the
	// size the job runs at.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=750
	Replicas int32 `json:"replicas"`

	// MinReplicas is the fewest replicas of the type the job runs with: a job admitted
	// (Kueue), or gang-scheduled, with at least this many starts; one that loses replicas
	// runs on while this many remain.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=750
	MinReplicas int32 `json:"minReplicas"`

	// MaxReplicas is the most replicas of the type the job may be resized to.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=750
	MaxReplicas int32 `json:"maxReplicas"`
}

// ElasticStatus is the size an elastic job runs at.
type ElasticStatus struct {
	// Replicas counts the elastic type's replicas that are running now.
	Replicas int32 `json:"replicas"`

	// Selector selects the elastic type's pods, in the form of a label selector's string
	// (for the scale subresource, which autoscalers read).
	// +optional
	Selector string `json:"selector,omitempty"`
}
