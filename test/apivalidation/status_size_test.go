package apivalidation

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// A job's status lists every replica (status.tasks[].replicas[]), and the API server keeps
// the whole job (metadata, spec and status) as one etcd value. etcd refuses a request larger
// than its --max-request-bytes, 1.5 MiB by default, and a status write it refuses fails on
// every retry: the job's status would stop for good. These tests build the largest job the
// CRDs admit (MaxReplicas replicas) in the worst realistic state and check that it stays well
// below that limit.
const (
	etcdRequestLimit = 3 << 19 // 1.5 MiB, etcd's default --max-request-bytes
	// 1.1 MiB: the largest job, with 400 KiB to spare below etcd's limit. (It was 1 MiB
	// until the failure policy's rule reference and avoided nodes joined the status: 16
	// replica types of 750 replicas in all, every pod evicted twice, come to 1.06 MB.)
	objectBudget = 1<<20 + 1<<20/10
)

// Realistic values at their longest: a cloud node name, an eviction's reason and message as
// the kubelet writes them, a container that ended with the reason of a lost node.
const (
	worstContainer = "pytorch-trainer"
	worstReason    = "ContainerStatusUnknown"
	worstExitCode  = int32(137)
	worstPodReason = "Evicted"
	// The kubelet's eviction message: the node's pressure, then each container's usage.
	worstPodMessage = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92164Ki. " +
		"Container " + worstContainer + " was using 15728640Ki, request is 8Gi, has larger consumption of memory. "
)

func worstNode(i int) string {
	return fmt.Sprintf("ip-172-31-%d-%d.ap-northeast-1.compute.internal", 100+i%150, 100+i%150)
}

func worstUID(i, pod int) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", (i*7919+pod)&0xffffffff, i%65536, pod%4096, i%4096, i*104729+pod))
}

func worstContainers() []batch.ContainerStatus {
	return []batch.ContainerStatus{{Name: worstContainer, State: batch.ContainerTerminated, ExitCode: ptr.To(worstExitCode), Reason: worstReason}}
}

// worstReplica is a replica's status entry at its largest: its pod failed after a restart,
// both pods evicted, every field set.
func worstReplica(name string, i int) batch.ReplicaStatus {
	return batch.ReplicaStatus{
		Name: name, UID: worstUID(i, 1), Phase: batch.ReplicaFailed, RestartCount: 10, Disruptions: 10,
		Containers: worstContainers(), Node: worstNode(i), Reason: worstPodReason, Message: worstPodMessage,
		LastTermination: &batch.ReplicaTermination{
			UID: worstUID(i, 0), Phase: batch.ReplicaFailed, Node: worstNode(i + 1), Disrupted: true,
			Reason: worstPodReason, Message: worstPodMessage, Containers: worstContainers(),
			Rule: &batch.FailurePolicyRuleRef{Index: 31, Action: batch.RestartReplica}, Attempt: 2147483647,
		},
	}
}

// worstProgress is status.progress at its largest: every replica reported, with a step and a
// percentage, and the most metrics, each name and value at its longest.
func worstProgress(names []string) *batch.JobProgress {
	now := metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.UTC))
	p := &batch.JobProgress{ProgressPercentage: ptr.To[int32](99), EstimatedRemainingSeconds: ptr.To[int32](2147483647),
		Step: ptr.To[int64](9999999999), TotalSteps: ptr.To[int64](9999999999), Epoch: ptr.To[int64](99999), TotalEpochs: ptr.To[int64](99999),
		LastUpdatedTime: &now, Replica: names[len(names)-1]}
	for i := range 16 {
		p.Metrics = append(p.Metrics, batch.ProgressMetric{Name: fmt.Sprintf("%064d", i), Value: strings.Repeat("9", 64)})
	}
	for i := range names {
		p.Replicas = append(p.Replicas, batch.ReplicaProgress{UID: worstUID(i, 1), ProgressPercentage: ptr.To[int32](99), ReportTime: now})
	}
	return p
}

// worstExclusions are status.excludedNodes at their longest.
func worstExclusions() []batch.ExcludedNode {
	var out []batch.ExcludedNode
	for i := range 64 {
		out = append(out, batch.ExcludedNode{Node: worstNode(i), Replica: fmt.Sprintf("job-worker-%d", i),
			Reason: "DeletionByTaintManager", Time: metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))})
	}
	return out
}

// sidecarReplica is worstReplica with a second container in every pod (a service mesh's
// proxy, a log shipper).
func sidecarReplica(name string, i int) batch.ReplicaStatus {
	r := worstReplica(name, i)
	sidecar := batch.ContainerStatus{Name: "istio-proxy", State: batch.ContainerTerminated, ExitCode: ptr.To(worstExitCode), Reason: worstReason}
	r.Containers = append(r.Containers, sidecar)
	r.LastTermination.Containers = append(r.LastTermination.Containers, sidecar)
	return r
}

// runningReplica is a replica's status entry in the common case: its pod runs.
func runningReplica(name string, i int) batch.ReplicaStatus {
	return batch.ReplicaStatus{Name: name, UID: worstUID(i, 0), Phase: batch.ReplicaRunning,
		Containers: []batch.ContainerStatus{{Name: worstContainer, State: batch.ContainerRunning}}, Node: worstNode(i)}
}

// TestWorstReplicaEntrySetsEveryField: the worst-case entry must grow with the type. A field
// added to ReplicaStatus (or what it holds) must be given its largest realistic value here.
func TestWorstReplicaEntrySetsEveryField(t *testing.T) {
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s is not set in worstReplica: give it its largest realistic value", path)
				return
			}
			check(path, v.Elem())
		case reflect.Slice:
			if v.Len() == 0 {
				t.Errorf("%s is empty in worstReplica: give it its largest realistic value", path)
				return
			}
			check(path+"[0]", v.Index(0))
		case reflect.Struct:
			for i := range v.NumField() {
				check(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		default:
			if v.IsZero() {
				t.Errorf("%s is not set in worstReplica: give it its largest realistic value", path)
			}
		}
	}
	check("ReplicaStatus", reflect.ValueOf(worstReplica("job-worker-0", 0)))
}

// richTemplate is a production-like pod template: a training container with its flags,
// environment, resources and mounts.
func richTemplate(replicaType string) corev1.PodTemplateSpec {
	var env []corev1.EnvVar
	for _, e := range []string{"NCCL_DEBUG", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX",
		"OMP_NUM_THREADS", "PYTHONUNBUFFERED", "HF_HOME", "TRANSFORMERS_CACHE", "WANDB_PROJECT", "WANDB_MODE",
		"CUDA_DEVICE_MAX_CONNECTIONS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_DISTRIBUTED_DEBUG"} {
		env = append(env, corev1.EnvVar{Name: e, Value: "value-of-" + strings.ToLower(e)})
	}
	env = append(env,
		corev1.EnvVar{Name: "RANK", Value: "$(rank)"},
		corev1.EnvVar{Name: "WORLD_SIZE", Value: "$(replicas[" + replicaType + "])"},
		corev1.EnvVar{Name: "MASTER_ADDR", Value: "$(service." + replicaType + "[0].host)"},
		corev1.EnvVar{Name: "MASTER_PORT", Value: "$(service.port[torch])"},
		corev1.EnvVar{Name: "WANDB_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "wandb-credentials"}, Key: "api-key"}}},
	)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1600Gi"),
		"nvidia.com/gpu": resource.MustParse("8"), "rdma/hca_shared_devices_a": resource.MustParse("1")}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "llm-pretraining", "team": "foundation-models"},
			Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    worstContainer,
				Image:   "registry.example.com/ml-platform/pytorch-training:2.4.1-cuda12.4-cudnn9-py3.11",
				Command: []string{"torchrun"},
				Args: []string{"--nnodes=$(replicas[" + replicaType + "])", "--nproc-per-node=8", "--node-rank=$(rank)",
					"--master-addr=$(service." + replicaType + "[0].host)", "--master-port=$(service.port[torch])",
					"/workspace/train.py", "--config=/etc/training/config.yaml", "--data=/mnt/datasets/pretraining/v3",
					"--checkpoint-dir=/mnt/checkpoints/llm-pretraining", "--resume-from-latest"},
				WorkingDir:      "/workspace",
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "torch", ContainerPort: 29500}},
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
				VolumeMounts:    []corev1.VolumeMount{{Name: "datasets", MountPath: "/mnt/datasets", ReadOnly: true}, {Name: "checkpoints", MountPath: "/mnt/checkpoints"}, {Name: "config", MountPath: "/etc/training"}, {Name: "dshm", MountPath: "/dev/shm"}},
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "datasets", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets", ReadOnly: true}}},
				{Name: "checkpoints", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "llm-checkpoints"}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "llm-pretraining-config"}}}},
				{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Gi"))}}},
			},
			NodeSelector: map[string]string{"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": "ap-northeast-1a"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "training", Effect: corev1.TaintEffectNoSchedule}},
			PriorityClassName: "training-high",
		},
	}
}

// digits is how many digits the largest rank of count replicas has.
func digits(count int) int { return len(fmt.Sprint(max(count-1, 0))) }

// largestJob is the largest GenericJob the CRD admits, as the API server stores it once its
// status is written: replicas replicas spread over nTypes replica types (names at their
// longest), a production-like template for each, created with client-side `kubectl apply`
// (its last-applied-configuration annotation repeats the spec, and managedFields list its
// fields), and every replica's status entry made by entry.
func largestJob(replicas, nTypes int, entry func(name string, i int) batch.ReplicaStatus) *batch.GenericJob {
	typeName := func(i int) string { return fmt.Sprintf("worker-%c", 'a'+i) }
	count := func(i int) int {
		if i == 0 {
			return replicas/nTypes + replicas%nTypes
		}
		return replicas / nTypes
	}
	// The longest name the CEL rule allows: <name>-<type>-<rank> fits in 63 characters.
	name := strings.Repeat("j", 63-2-len(typeName(0))-digits(count(0)))
	namespace := strings.Repeat("n", 63)

	job := &batch.GenericJob{
		TypeMeta: metav1.TypeMeta{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "llm-pretraining", "team": "foundation-models", "experiment": "run-2025-11-23-a"}},
		Spec: batch.GenericJobSpec{
			Service:       &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "torch", Port: 29500}}},
			CleanUpPolicy: batch.CleanUpUnfinished,
			Scheduler:     &batch.SchedulePolicy{T9kScheduler: &batch.T9kScheduler{Queue: "foundation-models", Priority: 80}},
			FailureRules:  []batch.ReplicaRule{{typeName(0): {0}}},
		},
	}
	for i := range nTypes {
		job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, batch.GenericReplicaSpec{Type: typeName(i), Replicas: ptr.To(int32(count(i))),
			RestartPolicy: &batch.GenericRestartPolicy{Policy: batch.RestartOnFailure, Limit: ptr.To[int32](10)}, Template: richTemplate(typeName(i))})
	}
	applied, err := json.Marshal(job)
	if err != nil {
		panic(err)
	}

	now := metav1.NewTime(time.Date(2025, 11, 23, 10, 0, 0, 0, time.UTC))
	job.UID, job.ResourceVersion, job.Generation, job.CreationTimestamp = worstUID(99999, 0), "1234567890", 3, now
	job.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(applied) + "\n"}

	// The status: every replica failed for good, as when the whole job was evicted twice (or,
	// with runningReplica, every replica runs).
	s := &job.Status
	var failed []string
	for ti, spec := range job.Spec.ReplicaSpecs {
		task := batch.TaskStatus{Type: spec.Type}
		for rank := range int(*spec.Replicas) {
			r := entry(fmt.Sprintf("%s-%s-%d", name, spec.Type, rank), ti*100000+rank)
			task.Replicas = append(task.Replicas, r)
			task.RestartCount += r.RestartCount
			if r.Phase == batch.ReplicaFailed {
				failed = append(failed, fmt.Sprintf("%s with exit code %d", r.Name, worstExitCode))
			}
		}
		s.Tasks = append(s.Tasks, task)
	}
	type condition struct {
		t       batch.JobConditionType
		status  corev1.ConditionStatus
		reason  string
		message string
	}
	conditions := []condition{
		{batch.JobConditionInitialized, corev1.ConditionTrue, "-", "The job has been initialized successfully."},
		{batch.JobConditionRunning, corev1.ConditionTrue, "-", "All pods are running normally."},
		{batch.JobConditionReplicaFailure, corev1.ConditionFalse, "-", "All pods are running normally."},
		{batch.JobConditionCompleted, corev1.ConditionFalse, "-", "The job has not finished."},
		{batch.JobConditionFailed, corev1.ConditionFalse, "-", "The job has not failed."},
		{batch.JobConditionPaused, corev1.ConditionFalse, "-", "The job is not paused."},
	}
	s.Phase, s.Aggregate.Running = batch.JobRunning, int32(replicas)
	if len(failed) > 0 {
		outcome := fmt.Sprintf("The job is failed: replica %s-%s-%d failed with exit code %d and has no restart left.", name, typeName(0), count(0)-1, worstExitCode)
		conditions[1] = condition{batch.JobConditionRunning, corev1.ConditionFalse, "Failed", outcome}
		// The engine names every failed replica with its exit code.
		conditions[2] = condition{batch.JobConditionReplicaFailure, corev1.ConditionTrue, "ReplicaFailed", "Failed replicas: " + strings.Join(failed, ", ") + "."}
		conditions[3] = condition{batch.JobConditionCompleted, corev1.ConditionFalse, "Failed", outcome}
		conditions[4] = condition{batch.JobConditionFailed, corev1.ConditionTrue, "Failed", outcome}
		s.Phase, s.Aggregate.Running, s.Aggregate.Failed = batch.JobFailed, 0, int32(len(failed))
	}
	for _, c := range conditions {
		s.Conditions = append(s.Conditions, batch.JobCondition{Type: c.t, Status: c.status, LastTransitionTime: now, Reason: c.reason, Message: c.message})
	}
	s.ObservedGeneration, s.StartTime, s.CompletionTime, s.Restarts, s.Attempt = 3, &now, &now, 10, 2147483647
	var names []string
	for _, task := range s.Tasks {
		for _, r := range task.Replicas {
			names = append(names, r.Name)
		}
	}
	// Every replica's report (a finished job keeps none: the engine drops them), the most
	// metrics, the most nodes avoided.
	s.Progress, s.ExcludedNodes = worstProgress(names), worstExclusions()
	if s.Phase == batch.JobFailed {
		s.Progress.Replicas = nil
	}

	// managedFields: kubectl's fields (metadata and spec), and the controller's status fields,
	// status.tasks and status.progress's lists being atomic.
	creator := map[string]any{}
	if err := json.Unmarshal(applied, &creator); err != nil {
		panic(err)
	}
	delete(creator, "apiVersion")
	delete(creator, "kind")
	creator["metadata"].(map[string]any)["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": job.Annotations["kubectl.kubernetes.io/last-applied-configuration"]}
	status := s.DeepCopy()
	status.Tasks, status.Progress.Replicas, status.Progress.Metrics = nil, nil, nil // atomic: the extra leaves below
	job.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: job.APIVersion, Time: &now,
			FieldsType: "FieldsV1", FieldsV1: fieldsOf(creator)},
		{Manager: "t9k-job-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: job.APIVersion, Time: &now,
			FieldsType: "FieldsV1", FieldsV1: fieldsOf(map[string]any{"status": toMap(status)}, []string{"status", "tasks"},
				[]string{"status", "progress", "replicas"}, []string{"status", "progress", "metrics"}), Subresource: "status"},
	}
	return job
}

func toMap(v any) map[string]any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	return m
}

// fieldsOf is the field set of obj as managedFields record it, plus the leaves at extra
// (atomic lists, left out of obj).
func fieldsOf(obj map[string]any, extra ...[]string) *metav1.FieldsV1 {
	set := fieldpath.SetFromValue(value.NewValueInterface(obj))
	for _, path := range extra {
		set.Insert(fieldpath.MakePathOrDie(toAny(path)...))
	}
	data, err := set.ToJSON()
	if err != nil {
		panic(err)
	}
	return &metav1.FieldsV1{Raw: data}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// TestLargestJobFitsInOneObject: the largest job the CRDs admit, every replica in its
// largest realistic state, stays within objectBudget as stored, for a job of one replica
// type and of the most types a GenericJob may have; with a sidecar in every pod, it still
// stays below etcd's limit. It reports the size of one replica's entry.
func TestLargestJobFitsInOneObject(t *testing.T) {
	for _, nTypes := range []int{1, 16} {
		for _, tc := range []struct {
			state string
			entry func(string, int) batch.ReplicaStatus
			limit int
		}{
			{"running", runningReplica, objectBudget},
			{"failed after a restart, both pods evicted", worstReplica, objectBudget},
			{"the same, with a sidecar container", sidecarReplica, etcdRequestLimit},
		} {
			job := largestJob(MaxReplicas, nTypes, tc.entry)
			total := jsonSize(t, job)
			statusSize := jsonSize(t, job.Status)
			last := job.Status.Tasks[0].Replicas[len(job.Status.Tasks[0].Replicas)-1]
			t.Logf("%d replicas in %d types, %s: the job is %d bytes (status %d, the rest %d); one replica's entry %d bytes, %d bytes of status per replica",
				MaxReplicas, nTypes, tc.state, total, statusSize, total-statusSize, jsonSize(t, last), statusSize/MaxReplicas)
			if total > tc.limit {
				t.Errorf("%d replicas in %d types, %s: the job is %d bytes as stored, over %d (etcd refuses requests over %d): lower MaxReplicas and the CRDs' limit, or make the status smaller",
					MaxReplicas, nTypes, tc.state, total, tc.limit, etcdRequestLimit)
			}
		}
	}
}
