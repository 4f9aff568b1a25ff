package v1beta1

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestGenericJobDefaults(t *testing.T) {
	job := &GenericJob{Spec: GenericJobSpec{
		ReplicaSpecs: []GenericReplicaSpec{
			{Type: "master"},
			{Type: "worker", Replicas: ptr.To[int32](4), RestartPolicy: &GenericRestartPolicy{Policy: RestartOnFailure, Limit: ptr.To[int32](3)}},
		},
		Service: &ServiceOption{Ports: []ServicePort{{Name: "http", Port: 2222}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}}
	job.Default()
	s := job.Spec
	if got := *s.ReplicaSpecs[0].Replicas; got != 1 {
		t.Errorf("master replicas = %d, want 1", got)
	}
	if got := *s.ReplicaSpecs[1].Replicas; got != 4 {
		t.Errorf("worker replicas = %d, want the 4 set", got)
	}
	if got := *s.ReplicaSpecs[0].RestartPolicy; got.Policy != RestartNever || got.Limit != nil {
		t.Errorf("master restart policy = %+v, want Never without limit", got)
	}
	if got := *s.ReplicaSpecs[1].RestartPolicy; got.Policy != RestartOnFailure || *got.Limit != 3 {
		t.Errorf("worker restart policy = %+v, want the OnFailure/3 set", got)
	}
	if s.CleanUpPolicy != CleanUpUnfinished {
		t.Errorf("cleanUpPolicy = %q, want Unfinished", s.CleanUpPolicy)
	}
	if p := s.Service.Ports; p[0].Protocol != corev1.ProtocolTCP || p[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("port protocols = %q, %q; want TCP and the UDP set", p[0].Protocol, p[1].Protocol)
	}
	if s.RunMode != nil {
		t.Errorf("runMode = %+v, want it left unset", s.RunMode)
	}
}

func TestGenericJobKeepsCleanUpPolicy(t *testing.T) {
	job := &GenericJob{Spec: GenericJobSpec{ReplicaSpecs: []GenericReplicaSpec{{Type: "worker"}}, CleanUpPolicy: CleanUpNone}}
	job.Default()
	if job.Spec.CleanUpPolicy != CleanUpNone {
		t.Errorf("cleanUpPolicy = %q, want the None set", job.Spec.CleanUpPolicy)
	}
}

// TestRunModeDefaults: every replica type gets an explicit debug and resume setting, with the
// documented defaults where the user gave none.
func TestRunModeDefaults(t *testing.T) {
	sleepInf := []string{"sleep", "inf"}
	sshd := []string{"/usr/bin/sshd", "-D"}
	cases := []struct {
		name       string
		job        interface{ Default() }
		wantDebug  []ReplicaDebugSet
		wantResume []ResumeSpec
	}{
		{
			name:      "GenericJob debug without replicaSpecs",
			job:       &GenericJob{Spec: GenericJobSpec{ReplicaSpecs: []GenericReplicaSpec{{Type: "master"}, {Type: "worker"}}, RunMode: &RunMode{Debug: &DebugMode{Enabled: true}}}},
			wantDebug: []ReplicaDebugSet{{Type: "master", Command: sleepInf}, {Type: "worker", Command: sleepInf}},
		},
		{
			name: "GenericJob debug with one type set",
			job: &GenericJob{Spec: GenericJobSpec{ReplicaSpecs: []GenericReplicaSpec{{Type: "master"}, {Type: "worker"}}, RunMode: &RunMode{Debug: &DebugMode{Enabled: true,
				ReplicaSpecs: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}}}}},
			wantDebug: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}, {Type: "master", Command: sleepInf}},
		},
		{
			name: "debug entry without command",
			job: &GenericJob{Spec: GenericJobSpec{ReplicaSpecs: []GenericReplicaSpec{{Type: "worker"}}, RunMode: &RunMode{Debug: &DebugMode{Enabled: true,
				ReplicaSpecs: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true}}}}}},
			wantDebug: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true, Command: sleepInf}},
		},
		{
			name:      "MPIJob debug defaults per role",
			job:       &MPIJob{Spec: MPIJobSpec{RunMode: &RunMode{Debug: &DebugMode{Enabled: true}}}},
			wantDebug: []ReplicaDebugSet{{Type: "launcher", Command: sleepInf}, {Type: "worker", Command: sshd}},
		},
		{
			name: "MPIJob worker debug entry without command",
			job: &MPIJob{Spec: MPIJobSpec{RunMode: &RunMode{Debug: &DebugMode{Enabled: true,
				ReplicaSpecs: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true}}}}}},
			wantDebug: []ReplicaDebugSet{{Type: "worker", SkipInitContainer: true, Command: sshd}, {Type: "launcher", Command: sleepInf}},
		},
		{
			name:      "ColossalAIJob debug defaults",
			job:       &ColossalAIJob{Spec: ColossalAIJobSpec{RunMode: &RunMode{Debug: &DebugMode{Enabled: true}}}},
			wantDebug: []ReplicaDebugSet{{Type: "launcher", Command: sleepInf}, {Type: "worker", Command: sleepInf}},
		},
		{
			name: "TensorFlowTrainingJob pause without resumeSpecs",
			job: &TensorFlowTrainingJob{Spec: TensorFlowTrainingJobSpec{ReplicaSpecs: []TrainingReplicaSpec{{Type: "chief"}, {Type: "worker"}},
				RunMode: &RunMode{Pause: &PauseMode{Enabled: true}}}},
			wantResume: []ResumeSpec{{Type: "chief"}, {Type: "worker"}},
		},
		{
			name: "XGBoostTrainingJob pause with one type set",
			job: &XGBoostTrainingJob{Spec: XGBoostTrainingJobSpec{ReplicaSpecs: []TrainingReplicaSpec{{Type: "master"}, {Type: "worker"}},
				RunMode: &RunMode{Pause: &PauseMode{Enabled: true, ResumeSpecs: []ResumeSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}}}}},
			wantResume: []ResumeSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}, {Type: "master"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.Default()
			var mode *RunMode
			switch j := tc.job.(type) {
			case *GenericJob:
				mode = j.Spec.RunMode
			case *MPIJob:
				mode = j.Spec.RunMode
			case *ColossalAIJob:
				mode = j.Spec.RunMode
			case *TensorFlowTrainingJob:
				mode = j.Spec.RunMode
			case *XGBoostTrainingJob:
				mode = j.Spec.RunMode
			}
			if tc.wantDebug != nil && !reflect.DeepEqual(mode.Debug.ReplicaSpecs, tc.wantDebug) {
				t.Errorf("debug replicaSpecs = %+v, want %+v", mode.Debug.ReplicaSpecs, tc.wantDebug)
			}
			if tc.wantResume != nil && !reflect.DeepEqual(mode.Pause.ResumeSpecs, tc.wantResume) {
				t.Errorf("resumeSpecs = %+v, want %+v", mode.Pause.ResumeSpecs, tc.wantResume)
			}
		})
	}
}

// TestDefaultDebugCommandNotShared: a job's defaulted command must not alias the package
// default, or one job's edit would leak into every other job.
func TestDefaultDebugCommandNotShared(t *testing.T) {
	job := &GenericJob{Spec: GenericJobSpec{ReplicaSpecs: []GenericReplicaSpec{{Type: "worker"}}, RunMode: &RunMode{Debug: &DebugMode{Enabled: true}}}}
	job.Default()
	job.Spec.RunMode.Debug.ReplicaSpecs[0].Command[0] = "changed"
	if DefaultDebugCommand[0] != "sleep" {
		t.Fatalf("DefaultDebugCommand changed through a job: %v", DefaultDebugCommand)
	}
}

func TestLauncherKindDefaults(t *testing.T) {
	mpi := &MPIJob{}
	mpi.Default()
	if *mpi.Spec.Worker.Replicas != 1 || mpi.Spec.SSH.SshdPath != "/usr/sbin/sshd" || mpi.Spec.SSH.AuthMountPath != "/root/.ssh" {
		t.Errorf("MPIJob defaults: replicas %d, ssh %+v", *mpi.Spec.Worker.Replicas, mpi.Spec.SSH)
	}
	cai := &ColossalAIJob{Spec: ColossalAIJobSpec{SSH: SSHConfig{SshdPath: "/opt/sshd"}}}
	cai.Default()
	if *cai.Spec.Worker.Replicas != 1 || *cai.Spec.Worker.ProcPerWorker != 1 || cai.Spec.SSH.SshdPath != "/opt/sshd" || cai.Spec.SSH.AuthMountPath != "/root/.ssh" {
		t.Errorf("ColossalAIJob defaults: replicas %d, procPerWorker %d, ssh %+v", *cai.Spec.Worker.Replicas, *cai.Spec.Worker.ProcPerWorker, cai.Spec.SSH)
	}
}

func TestTrainingDefaults(t *testing.T) {
	tf := &TensorFlowTrainingJob{Spec: TensorFlowTrainingJobSpec{ReplicaSpecs: []TrainingReplicaSpec{{Type: "worker"}, {Type: "ps", RestartPolicy: RestartExitCode}}}}
	tf.Default()
	if r := tf.Spec.ReplicaSpecs; *r[0].Replicas != 1 || r[0].RestartPolicy != RestartNever || r[1].RestartPolicy != RestartExitCode {
		t.Errorf("TF replica defaults: %+v", r)
	}
	if p := tf.Spec.RunPolicy; p.CleanUpPolicy != CleanUpUnfinished || p.BackoffLimit != nil || p.ActiveDeadlineSeconds != nil {
		t.Errorf("TF run policy defaults: %+v", p)
	}
	xgb := &XGBoostTrainingJob{Spec: XGBoostTrainingJobSpec{ReplicaSpecs: []TrainingReplicaSpec{{Type: "master"}}, RunPolicy: TrainingRunPolicy{CleanUpPolicy: CleanUpAll}}}
	xgb.Default()
	if xgb.Spec.RunPolicy.CleanUpPolicy != CleanUpAll || *xgb.Spec.ReplicaSpecs[0].Replicas != 1 {
		t.Errorf("XGBoost defaults: %+v", xgb.Spec)
	}
}
