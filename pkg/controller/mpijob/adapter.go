// Package mpijob is the MPIJob adapter of the job engine: workers that run sshd, and a
// launcher, made from the worker template, that runs mpirun over them (docs/launcher-kinds.md).
package mpijob

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	informers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/launcher"
)

const (
	workerContainer   = "mpi-worker"
	launcherContainer = "launcher"
)

// SucceededMessage is the message of an MPIJob whose launcher exited with code 0: mpirun says only
// that the job ended (the docs explain why), so the launcher's log tells how it went.
const SucceededMessage = "The job has ended: mpirun exited with code 0. The launcher's log tells how training went."

// New returns the MPIJob adapter.
func New(client versioned.Interface, informer informers.MPIJobInformer) engine.Adapter {
	return engine.NewAdapter[*batch.MPIJob]("MPIJob", informer.Informer(), informer.Lister().MPIJobs, client.BatchV1beta1().MPIJobs, Plan)
}

// Plan describes a defaulted MPIJob: the launcher, then the workers.
func Plan(job *batch.MPIJob) (*engine.Plan, error) {
	spec := &job.Spec
	slots := Slots(spec.Worker.ExtraMPIArgs, spec.Worker.Template)
	j := launcher.Layout{Name: job.Name, UID: string(job.UID), Replicas: *spec.Worker.Replicas, SSH: spec.SSH,
		HostLine: func(host string) string { return fmt.Sprintf("%s slots=%d", host, slots) }}
	plan := &engine.Plan{
		Groups: []engine.Group{
			j.Launcher(launcherPod(spec), launcherContainer),
			j.Workers(spec.Worker.Template, workerContainer),
		},
		Objects: j.Objects(),
		Judge:   launcher.Judge(job.Name, SucceededMessage),
	}
	launcher.CleanUp(plan, spec.RunPolicy.CleanUpWorkers)
	plan.SetRunMode(spec.RunMode, spec.Scheduler)
	j.DebugMode(plan, job.Namespace, MPIRun(spec))
	return plan, nil
}

// launcherPod is the worker template with its mpi-worker container, renamed launcher, alone,
// running mpirun, and holding no extended resource (an accelerator is the workers').
func launcherPod(spec *batch.MPIJobSpec) corev1.PodTemplateSpec {
	t := *spec.Worker.Template.DeepCopy()
	var main corev1.Container
	for _, c := range t.Spec.Containers {
		if c.Name == workerContainer {
			main = c
		}
	}
	main.Name = launcherContainer
	main.Command, main.Args = MPIRun(spec), nil
	// OpenMPI shortens host names to their first label, which resolves only inside its own
	// pod; kept whole (<job>-worker-<i>.<job>), every worker's daemon resolves every other.
	if !hasEnv(main.Env, keepFQDN) {
		main.Env = append(main.Env, corev1.EnvVar{Name: keepFQDN, Value: "true"})
	}
	main.ReadinessProbe, main.LivenessProbe, main.StartupProbe, main.Ports = nil, nil, nil, nil
	main.Resources.Limits = withoutExtended(main.Resources.Limits)
	main.Resources.Requests = withoutExtended(main.Resources.Requests)
	t.Spec.Containers = []corev1.Container{main}
	return t
}

// MPIRun is the launcher's command: mpirun (from mpiHome when set, with --prefix so that the
// workers find OpenMPI there too) over the hostfile, with the ssh client config of the job's
// Secret, each MCA parameter, the extra arguments as given, then the command.
func MPIRun(spec *batch.MPIJobSpec) []string {
	cmd := []string{"mpirun"}
	if home := strings.TrimSuffix(spec.MPIHome, "/"); home != "" {
		cmd = []string{home + "/bin/mpirun", "--prefix", home}
	}
	cmd = append(cmd, "--hostfile", launcher.HostfilePath)
	if _, set := spec.MCA["plm_rsh_args"]; !set {
		cmd = append(cmd, "--mca", "plm_rsh_args", "-F "+spec.SSH.AuthMountPath+"/config")
	}
	keys := make([]string, 0, len(spec.MCA))
	for k := range spec.MCA {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd = append(cmd, "--mca", k, spec.MCA[k])
	}
	cmd = append(cmd, spec.Worker.ExtraMPIArgs...)
	return append(cmd, spec.Worker.Cmd...)
}

// Slots is how many processes the hostfile lets mpirun start on each worker: the processes
// per node that extraMPIArgs ask for (-N, -npernode, --map-by ppr:N:node), else the
// worker's GPUs, else 1. mpirun refuses to start more processes on a host than its slots.
func Slots(args []string, template corev1.PodTemplateSpec) int {
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case a == "-N" || a == "-npernode" || a == "--npernode":
			if n, err := strconv.Atoi(next); err == nil && n > 0 {
				return n
			}
		case a == "--map-by" || a == "-map-by":
			if parts := strings.Split(next, ":"); len(parts) >= 3 && strings.EqualFold(parts[0], "ppr") {
				if n, err := strconv.Atoi(parts[1]); err == nil && n > 0 {
					return n
				}
			}
		}
	}
	for _, c := range template.Spec.Containers {
		if c.Name == workerContainer {
			if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok && q.Value() > 0 {
				return int(q.Value())
			}
		}
	}
	return 1
}

const keepFQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// withoutExtended drops extended resources (those named with a domain, such as
// nvidia.com/gpu), keeping cpu, memory, ephemeral-storage and hugepages.
func withoutExtended(rl corev1.ResourceList) corev1.ResourceList {
	if rl == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for name, q := range rl {
		if !strings.Contains(string(name), "/") {
			out[name] = q
		}
	}
	return out
}
