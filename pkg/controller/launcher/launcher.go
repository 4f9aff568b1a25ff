// Package launcher is what the launcher kinds (MPIJob, ColossalAIJob) share: workers that run
// sshd behind one headless Service, a launcher that waits until every worker is Ready and
// reaches them over SSH with the job's own key and a hostfile, and an outcome read from the
// launcher alone (docs/launcher-kinds.md). Each kind's adapter adds only its launcher's command.
package launcher

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

const (
	// HostfileDir is where the hostfile is mounted in the launcher, as HostfileDir/hostfile.
	HostfileDir  = "/etc/t9k"
	hostfileKey  = "hostfile"
	sshPort      = 22
	sshVolume    = "t9k-ssh"
	hostfileVol  = "t9k-hostfile"
	secretMode   = 0o600
	hostfileMode = 0o644
)

// HostfilePath is the hostfile's path in the launcher.
const HostfilePath = HostfileDir + "/" + hostfileKey

// Layout is what the shared parts need to know of a launcher job.
type Layout struct {
	Name     string
	UID      string
	Replicas int32 // workers
	// SSH is the job's SSH setting, defaulted.
	SSH batch.SSHConfig
	// HostLine writes the hostfile line of one worker host name.
	HostLine func(host string) string
}

// WorkerHost is the name a worker resolves by: <job>-worker-<i>.<job>, its host name in the
// subdomain of the job's Service.
func WorkerHost(job string, rank int32) string {
	return fmt.Sprintf("%s-%s-%d.%s", job, batch.WorkerType, rank, job)
}

// SecretName and HostfileName name the job's SSH Secret and hostfile ConfigMap.
func SecretName(job string) string   { return job + "-ssh" }
func HostfileName(job string) string { return job + "-hostfile" }

// Objects are the job's Secret (its SSH keys), hostfile ConfigMap and workers' Service. The
// hostfile follows the number of workers; the Secret keeps its keys and follows
// ssh.authMountPath.
func (j Layout) Objects() []engine.PlannedChild {
	return []engine.PlannedChild{
		{Kind: engine.SecretKind, Name: SecretName(j.Name), Build: func(current metav1.Object) (metav1.Object, error) {
			var have map[string][]byte
			if s, ok := current.(*corev1.Secret); ok {
				have = s.Data
			}
			data, err := sshFiles(j.SSH.AuthMountPath, have)
			if err != nil {
				return nil, err
			}
			return &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: data}, nil
		}},
		{Kind: engine.ConfigMapKind, Name: HostfileName(j.Name), Build: func(metav1.Object) (metav1.Object, error) {
			var b strings.Builder
			for i := range j.Replicas {
				b.WriteString(j.HostLine(WorkerHost(j.Name, i)) + "\n")
			}
			return &corev1.ConfigMap{Data: map[string]string{hostfileKey: b.String()}}, nil
		}},
		{Kind: engine.ServiceKind, Name: j.Name, Build: func(metav1.Object) (metav1.Object, error) {
			return &corev1.Service{Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector: map[string]string{batch.LabelJobName: j.Name, batch.LabelReplicaType: batch.WorkerType,
					batch.LabelControllerUID: j.UID},
				Ports:                    []corev1.ServicePort{{Name: "ssh", Port: sshPort, TargetPort: intstr.FromInt32(sshPort)}},
				PublishNotReadyAddresses: true, // the workers resolve while they start
			}}, nil
		}},
	}
}

// Workers is the worker group: the template's main container runs sshd (its own command and
// args are ignored, as the docs say) with the job's keys, answers a TCP readiness probe on
// the SSH port, and every worker lives in the subdomain of the job's Service. Workers are
// never restarted.
func (j Layout) Workers(template corev1.PodTemplateSpec, mainContainer string) engine.Group {
	return engine.Group{
		Type: batch.WorkerType, Replicas: j.Replicas, Restart: batch.RestartNever, MainContainer: mainContainer,
		Template: func(int32) corev1.PodTemplateSpec {
			t := *template.DeepCopy()
			t.Spec.Subdomain = j.Name
			j.mountSSH(&t.Spec, false)
			for i := range t.Spec.Containers {
				c := &t.Spec.Containers[i]
				if c.Name != mainContainer {
					continue
				}
				c.Command, c.Args = j.sshdCommand(), nil
				if c.ReadinessProbe == nil {
					c.ReadinessProbe = &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(sshPort)}},
						PeriodSeconds: 2,
					}
				}
			}
			return t
		},
	}
}

// Launcher is the launcher group, <job>-launcher: the given pod with the SSH keys and the
// hostfile mounted, created once every worker is Ready. It is never restarted.
func (j Layout) Launcher(pod corev1.PodTemplateSpec, mainContainer string) engine.Group {
	return engine.Group{
		Type: batch.LauncherType, Replicas: 1, Restart: batch.RestartNever, MainContainer: mainContainer,
		After:   []string{batch.WorkerType},
		PodName: func(int32) string { return j.Name + "-" + batch.LauncherType },
		Template: func(int32) corev1.PodTemplateSpec {
			t := *pod.DeepCopy()
			j.mountSSH(&t.Spec, true)
			for i := range t.Spec.Containers {
				if c := &t.Spec.Containers[i]; c.Name == mainContainer {
					c.Command = WaitForHosts(c.Command)
				}
			}
			return t
		},
	}
}

// waitForHosts is the shell that runs before the launcher's command: a worker's name resolves
// once its DNS record is published, which follows its pod's address by a moment, and on a
// busy cluster may follow its readiness (the launcher is made once every worker is Ready):
// ssh would then fail mpirun (or colossalai run) on a name it cannot resolve yet. It waits
// for every host of the hostfile to resolve, a minute at most in all, then runs the
// command; an image without getent runs it at once. No $( in it: the kubelet would read
// that as a variable reference.
const waitForHosts = `command -v getent >/dev/null 2>&1 || exec "$@"
n=0
while read -r host _; do
  until getent hosts "$host" >/dev/null 2>&1 || [ "$n" -ge 60 ]; do n=` + "`expr $n + 1`" + `; sleep 1; done
done <` + HostfilePath + `
exec "$@"`

// WaitForHosts is the launcher's command run once the hostfile's hosts resolve (waitForHosts).
func WaitForHosts(command []string) []string {
	return append([]string{"/bin/sh", "-c", waitForHosts, "wait-for-hosts"}, command...)
}

// mountSSH mounts the job's SSH Secret at authMountPath in every container, and in the
// launcher the hostfile at HostfileDir.
func (j Layout) mountSSH(spec *corev1.PodSpec, hostfile bool) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: SecretName(j.Name), DefaultMode: ptr.To[int32](secretMode)}}})
	mounts := []corev1.VolumeMount{{Name: sshVolume, MountPath: j.SSH.AuthMountPath, ReadOnly: true}}
	if hostfile {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: hostfileVol, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: HostfileName(j.Name)},
				DefaultMode: ptr.To[int32](hostfileMode)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: hostfileVol, MountPath: HostfileDir, ReadOnly: true})
	}
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, mounts...)
	}
}

// sshdCommand runs sshd in the foreground, logging to stderr, with the job's host key and
// authorized keys from the Secret. The Secret's files are root-owned and read-only, and the
// mount's directory is not for sshd to judge: StrictModes is off. sshd wants its privilege
// separation directory, which images that do not start sshd themselves lack.
func (j Layout) sshdCommand() []string {
	return append([]string{"/bin/sh", "-c", `mkdir -p /run/sshd && exec "$@"`, "sshd", j.SSH.SshdPath}, j.sshdOptions(nil)...)
}

// sshdOptions are the job's sshd options: in the foreground (-D), logging to stderr (-e), on
// the SSH port, with the host key and authorized keys of the Secret; the first three only
// where args, sshd arguments already given, lack them.
func (j Layout) sshdOptions(args []string) []string {
	var out []string
	if !hasArg(args, func(a string) bool { return a == "-D" || a == "-d" }) {
		out = append(out, "-D")
	}
	if !hasArg(args, func(a string) bool { return a == "-e" }) {
		out = append(out, "-e")
	}
	if !hasArg(args, func(a string) bool { return strings.HasPrefix(a, "-p") }) {
		out = append(out, "-p", fmt.Sprint(sshPort))
	}
	dir := j.SSH.AuthMountPath
	return append(out,
		"-o", "HostKey="+dir+"/"+hostKeyFile,
		"-o", "AuthorizedKeysFile="+dir+"/"+authorizedKeysFile,
		"-o", "StrictModes=no", "-o", "PidFile=none")
}

func hasArg(args []string, is func(string) bool) bool {
	for _, a := range args {
		if is(a) {
			return true
		}
	}
	return false
}

// Judge reads the outcome (docs/launcher-kinds.md, "Outcome"). The launcher decides: exit code 0 ends
// the job with success (the message says what that means for the kind), another code with
// failure. But workers run sshd until the job ends, and the launcher cannot start or finish
// without them: a worker that ended, or was lost after the launcher started, fails the job
// and is named as the cause, also when the launcher failed in the same moment (mpirun exits
// a second after a worker's daemon dies). The verdict does not depend on which pod's event
// the controller saw first.
func Judge(job, succeeded string) func(engine.Replicas) *engine.Outcome {
	return func(rs engine.Replicas) *engine.Outcome {
		var l engine.Replica
		if ls := rs[batch.LauncherType]; len(ls) > 0 {
			l = ls[0]
		}
		launcher := job + "-" + batch.LauncherType
		if l.Phase == batch.ReplicaSucceeded {
			return &engine.Outcome{Succeeded: true, Message: succeeded}
		}
		started := !l.Held && l.Phase != batch.ReplicaCreating
		for rank, w := range rs[batch.WorkerType] {
			name := engine.ChildName(job, batch.WorkerType, int32(rank))
			switch {
			case w.Final:
				return &engine.Outcome{Message: fmt.Sprintf("The job failed: worker %s %s%s; workers must run until the launcher ends.",
					name, strings.ToLower(string(w.Phase)), engine.ExitText(w.ExitCode))}
			case started && w.Lost && w.Disruption != "" && w.Disruption != engine.ReasonDeleted:
				// A disruption is no failure of the program, but the launcher's run cannot
				// take a new worker: the job ends, saying what happened.
				return &engine.Outcome{Message: fmt.Sprintf("The job failed: worker %s was disrupted (%s) after the launcher started.", name, w.Disruption)}
			case started && (w.Lost || w.Phase == batch.ReplicaCreating):
				// The launcher starts only once every worker has a Ready pod: a worker
				// without one since was lost, whatever status had time to record.
				return &engine.Outcome{Message: fmt.Sprintf("The job failed: worker %s was deleted after the launcher started.", name)}
			}
		}
		switch {
		case l.Phase == batch.ReplicaFailed:
			return &engine.Outcome{Message: fmt.Sprintf("The job exited with an error code: %s failed%s.", launcher, engine.ExitText(l.ExitCode))}
		case l.Lost && l.Disruption != "" && l.Disruption != engine.ReasonDeleted:
			return &engine.Outcome{Message: fmt.Sprintf("The job failed: %s was disrupted (%s) while it ran.", launcher, l.Disruption)}
		case l.Lost:
			return &engine.Outcome{Message: fmt.Sprintf("The job failed: %s was deleted while it ran.", launcher)}
		}
		return nil
	}
}

// CleanUp is the clean-up of a launcher job: runPolicy.cleanUpWorkers deletes the workers
// once it has ended; the launcher is always kept, for its log.
func CleanUp(plan *engine.Plan, cleanUpWorkers bool) {
	plan.CleanUp, plan.CleanUpTypes = batch.CleanUpNone, nil
	if cleanUpWorkers {
		plan.CleanUp, plan.CleanUpTypes = batch.CleanUpAll, []string{batch.WorkerType}
	}
}
