// Package colossalaijob is the ColossalAIJob adapter of the job engine: workers that run sshd,
// and a launcher, made from spec.launcher, that runs `colossalai run` over them (docs/launcher-kinds.md,
// docs/colossalai.md).
package colossalaijob

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	informers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/launcher"
)

const (
	workerContainer   = "worker"
	launcherContainer = "launcher"
	// MasterPort is where worker 0 serves torch.distributed's rendezvous.
	MasterPort = 29500
)

// SucceededMessage is the message of a ColossalAIJob whose launcher exited with code 0.
const SucceededMessage = "The job has finished successfully: colossalai run exited with code 0."

// New returns the ColossalAIJob adapter.
func New(client versioned.Interface, informer informers.ColossalAIJobInformer) engine.Adapter {
	return engine.NewAdapter[*batch.ColossalAIJob]("ColossalAIJob", informer.Informer(), informer.Lister().ColossalAIJobs, client.BatchV1beta1().ColossalAIJobs, Plan)
}

// Plan describes a defaulted ColossalAIJob: the launcher, then the workers, which are never restarted
// (a restarted worker cannot rejoin ColossalAI training).
func Plan(job *batch.ColossalAIJob) (*engine.Plan, error) {
	spec := &job.Spec
	if _, err := ExtraLaunchArgs(spec.Worker.TorchArgs); err != nil {
		return nil, err
	}
	j := launcher.Layout{Name: job.Name, UID: string(job.UID), Replicas: *spec.Worker.Replicas, SSH: spec.SSH,
		HostLine: func(host string) string { return host }}
	plan := &engine.Plan{
		Groups: []engine.Group{
			j.Launcher(launcherPod(job.Name, spec), launcherContainer),
			j.Workers(spec.Worker.Template, workerContainer),
		},
		Objects: j.Objects(),
		Judge:   launcher.Judge(job.Name, SucceededMessage),
	}
	launcher.CleanUp(plan, spec.RunPolicy.CleanUpWorkers)
	plan.SetRunMode(spec.RunMode, spec.Scheduler)
	j.DebugMode(plan, job.Namespace, Run(job.Name, spec))
	return plan, nil
}

// launcherPod is spec.launcher's container (image, pull policy, working directory, env,
// resources) running colossalai run, in a pod with the worker template's labels,
// annotations and volumes, mounted where the worker container mounts them (the launcher's
// working directory is where the workers run the script), and the workers' placement and
// security settings.
func launcherPod(job string, spec *batch.ColossalAIJobSpec) corev1.PodTemplateSpec {
	worker := spec.Worker.Template.Spec
	c := corev1.Container{
		Name: launcherContainer, Image: spec.Launcher.Image, ImagePullPolicy: spec.Launcher.ImagePullPolicy,
		WorkingDir: spec.Launcher.WorkingDir, Env: spec.Launcher.Env, Resources: spec.Launcher.Resources,
		Command: Run(job, spec),
	}
	for _, wc := range worker.Containers {
		if wc.Name == workerContainer {
			c.VolumeMounts = append(c.VolumeMounts, wc.VolumeMounts...)
		}
	}
	return corev1.PodTemplateSpec{ObjectMeta: *spec.Worker.Template.ObjectMeta.DeepCopy(), Spec: corev1.PodSpec{
		Containers: []corev1.Container{c}, Volumes: worker.Volumes,
		ImagePullSecrets: worker.ImagePullSecrets, SecurityContext: worker.SecurityContext,
		NodeSelector: worker.NodeSelector, Affinity: worker.Affinity, Tolerations: worker.Tolerations,
		ServiceAccountName: worker.ServiceAccountName, PriorityClassName: worker.PriorityClassName,
	}}
}

// Run is the launcher's command: ColossalAI's launcher over the hostfile (one worker host per
// line), worker 0 as torch.distributed's master, procPerWorker processes per worker,
// torchArgs passed on to torchrun through --extra_launch_args, then the script and its
// arguments.
func Run(job string, spec *batch.ColossalAIJobSpec) []string {
	cmd := []string{"colossalai", "run",
		"--hostfile", launcher.HostfilePath,
		"--master_addr", launcher.WorkerHost(job, 0),
		"--master_port", fmt.Sprint(MasterPort),
		"--nproc_per_node", fmt.Sprint(*spec.Worker.ProcPerWorker)}
	if extra, _ := ExtraLaunchArgs(spec.Worker.TorchArgs); extra != "" { // checked by Plan
		cmd = append(cmd, "--extra_launch_args", extra)
	}
	return append(cmd, spec.Worker.Command...)
}

// ExtraLaunchArgs writes torchrun arguments ("--max_restarts=3", "--rdzv_backend c10d",
// "--standalone") the way colossalai run's --extra_launch_args takes them:
// "max_restarts=3,rdzv_backend=c10d,standalone". colossalai run splits that value at "," and
// each piece at "=", merges a key given twice, and writes a piece back as --key=value, or
// --key when the value is empty; an argument that cannot come through that unchanged (not a
// --option, a "," or a second "=" in it, an empty value, an option given twice) is an error
// naming spec.worker.torchArgs, so that the job fails before anything is created rather than
// in colossalai run, or with torchrun given something else.
func ExtraLaunchArgs(args []string) (string, error) {
	var parts []string
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		field := fmt.Sprintf("spec.worker.torchArgs[%d] %q", i, args[i])
		name, value, hasValue := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		switch {
		case !strings.HasPrefix(args[i], "--") || name == "" || strings.HasPrefix(name, "-"):
			return "", fmt.Errorf("%s is not a torchrun option: write --name, --name=value or --name value", field)
		case !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			i++
			field = fmt.Sprintf("spec.worker.torchArgs[%d] %q", i, args[i])
			value, hasValue = args[i], true
		}
		switch {
		case strings.ContainsAny(name+value, ",="):
			return "", fmt.Errorf("%s cannot be passed on: colossalai run reads torchArgs from one --extra_launch_args value, split at \",\" and \"=\"", field)
		case hasValue && value == "":
			return "", fmt.Errorf("%s has an empty value, which colossalai run would drop, passing --%s alone", field, name)
		case seen[name]:
			return "", fmt.Errorf("%s gives --%s a second time, and colossalai run keeps one", field, name)
		}
		seen[name] = true
		if hasValue {
			name += "=" + value
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, ","), nil
}
