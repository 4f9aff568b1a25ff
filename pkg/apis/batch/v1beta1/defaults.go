package v1beta1

import corev1 "k8s.io/api/core/v1"

// Defaults the documentation states, applied here and nowhere else. The controller defaults a
// copy of every job it reads; nothing is written back, so `kubectl get -o yaml` shows what the
// user wrote.

const (
	// DefaultReplicas is the replica count of a type that does not set one.
	DefaultReplicas int32 = 1
	// DefaultProcPerWorker is the number of ColossalAI processes per worker.
	DefaultProcPerWorker int32 = 1
	// DefaultSSHAuthMountPath is where SSH keys are mounted.
	DefaultSSHAuthMountPath = "/root/.ssh"
	// DefaultSshdPath is the path of sshd in worker images.
	DefaultSshdPath = "/usr/sbin/sshd"
	// DefaultCleanUpPolicy is the clean-up of a finished job that does not choose one: pods
	// that still run are deleted, ended ones are kept for their logs.
	DefaultCleanUpPolicy = CleanUpUnfinished

	// LauncherType and WorkerType are the replica types of MPIJob and ColossalAIJob.
	LauncherType = "launcher"
	WorkerType   = "worker"
)

var (
	// DefaultDebugCommand is what a replica runs in debug mode unless told otherwise.
	DefaultDebugCommand = []string{"sleep", "inf"}
	// DefaultMPIWorkerDebugCommand is what an MPIJob worker runs in debug mode unless told
	// otherwise.
	DefaultMPIWorkerDebugCommand = []string{"/usr/bin/sshd", "-D"}
)

// Default fills in the defaults of a GenericJob.
func (j *GenericJob) Default() {
	s := &j.Spec
	types := make([]string, 0, len(s.ReplicaSpecs))
	for i := range s.ReplicaSpecs {
		r := &s.ReplicaSpecs[i]
		types = append(types, r.Type)
		if e := s.Elastic; e != nil && e.ReplicaType == r.Type {
			// The elastic type's size is spec.elastic.replicas, the scale subresource's path.
			n := e.Replicas
			r.Replicas = &n
		}
		defaultInt32(&r.Replicas, DefaultReplicas)
		if r.RestartPolicy == nil {
			r.RestartPolicy = &GenericRestartPolicy{Policy: RestartNever}
		}
	}
	if s.CleanUpPolicy == "" {
		s.CleanUpPolicy = DefaultCleanUpPolicy
	}
	if s.Service != nil {
		for i := range s.Service.Ports {
			if s.Service.Ports[i].Protocol == "" {
				s.Service.Ports[i].Protocol = corev1.ProtocolTCP
			}
		}
	}
	s.RunMode.defaultFor(types, nil)
}

// Default fills in the defaults of an MPIJob.
func (j *MPIJob) Default() {
	s := &j.Spec
	defaultInt32(&s.Worker.Replicas, DefaultReplicas)
	s.SSH.defaults()
	s.RunMode.defaultFor([]string{LauncherType, WorkerType}, map[string][]string{WorkerType: DefaultMPIWorkerDebugCommand})
}

// Default fills in the defaults of a ColossalAIJob.
func (j *ColossalAIJob) Default() {
	s := &j.Spec
	defaultInt32(&s.Worker.Replicas, DefaultReplicas)
	defaultInt32(&s.Worker.ProcPerWorker, DefaultProcPerWorker)
	s.SSH.defaults()
	s.RunMode.defaultFor([]string{LauncherType, WorkerType}, nil)
}

// Default fills in the defaults of a TensorFlowTrainingJob.
func (j *TensorFlowTrainingJob) Default() {
	defaultTraining(j.Spec.ReplicaSpecs, &j.Spec.RunPolicy, j.Spec.RunMode)
}

// Default fills in the defaults of an XGBoostTrainingJob.
func (j *XGBoostTrainingJob) Default() {
	defaultTraining(j.Spec.ReplicaSpecs, &j.Spec.RunPolicy, j.Spec.RunMode)
}

func defaultTraining(specs []TrainingReplicaSpec, policy *TrainingRunPolicy, mode *RunMode) {
	types := make([]string, 0, len(specs))
	for i := range specs {
		r := &specs[i]
		types = append(types, r.Type)
		defaultInt32(&r.Replicas, DefaultReplicas)
		if r.RestartPolicy == "" {
			r.RestartPolicy = RestartNever
		}
	}
	if policy.CleanUpPolicy == "" {
		policy.CleanUpPolicy = DefaultCleanUpPolicy
	}
	mode.defaultFor(types, nil)
}

func (s *SSHConfig) defaults() {
	if s.AuthMountPath == "" {
		s.AuthMountPath = DefaultSSHAuthMountPath
	}
	if s.SshdPath == "" {
		s.SshdPath = DefaultSshdPath
	}
}

// defaultFor gives every replica type an explicit debug and resume setting, so that the
// controller looks a type up instead of knowing the defaults: a type the user did not list
// keeps its init containers and, in debug mode, runs its kind's debug command
// (debugCommands[type], else DefaultDebugCommand); on resume it runs its template unchanged.
func (m *RunMode) defaultFor(types []string, debugCommands map[string][]string) {
	if m == nil {
		return
	}
	debugCommand := func(t string) []string {
		if c, ok := debugCommands[t]; ok {
			return append([]string(nil), c...)
		}
		return append([]string(nil), DefaultDebugCommand...)
	}
	if d := m.Debug; d != nil {
		for i := range d.ReplicaSpecs {
			if len(d.ReplicaSpecs[i].Command) == 0 {
				d.ReplicaSpecs[i].Command = debugCommand(d.ReplicaSpecs[i].Type)
			}
		}
		for _, t := range types {
			if d.For(t) == nil {
				d.ReplicaSpecs = append(d.ReplicaSpecs, ReplicaDebugSet{Type: t, Command: debugCommand(t)})
			}
		}
	}
	if p := m.Pause; p != nil {
		for _, t := range types {
			if p.For(t) == nil {
				p.ResumeSpecs = append(p.ResumeSpecs, ResumeSpec{Type: t})
			}
		}
	}
}

// For returns the debug setting of a replica type, or nil when there is none.
func (d *DebugMode) For(replicaType string) *ReplicaDebugSet {
	if d == nil {
		return nil
	}
	for i := range d.ReplicaSpecs {
		if d.ReplicaSpecs[i].Type == replicaType {
			return &d.ReplicaSpecs[i]
		}
	}
	return nil
}

// For returns the resume setting of a replica type, or nil when there is none.
func (p *PauseMode) For(replicaType string) *ResumeSpec {
	if p == nil {
		return nil
	}
	for i := range p.ResumeSpecs {
		if p.ResumeSpecs[i].Type == replicaType {
			return &p.ResumeSpecs[i]
		}
	}
	return nil
}

func defaultInt32(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}
