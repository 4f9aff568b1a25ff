package mpijob

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/launcher"
)

// words splits a fuzzer's string into arguments at NULs (an argument cannot hold one); ""
// is no arguments.
func words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// hostfileOf builds the plan's hostfile.
func hostfileOf(t *testing.T, plan *engine.Plan) string {
	t.Helper()
	for _, o := range plan.Objects {
		if o.Kind == engine.ConfigMapKind {
			obj, err := o.Build(nil)
			if err != nil {
				t.Fatal(err)
			}
			return obj.(*corev1.ConfigMap).Data["hostfile"]
		}
	}
	t.Fatal("the plan has no hostfile")
	return ""
}

// FuzzMPIRun builds the documented MPIJob example with any mca, extraMPIArgs, cmd, mpiHome,
// worker count and GPUs. What the code promises (adapter.go, MPIRun, Slots, and
// launcher.Layout's hostfile):
//   - no panic;
//   - the launcher runs mpirun (<mpiHome>/bin/mpirun --prefix <mpiHome> with mpiHome),
//     --hostfile, every MCA parameter once as --mca key value (plm_rsh_args with the job's ssh
//     config unless given, the others by key), then extraMPIArgs and cmd exactly as given:
//     every user-given argument exactly once, in order;
//   - the hostfile parses back to one "<job>-worker-<i>.<job> slots=<n>" line per worker, in
//     rank order, n being the first per-node count extraMPIArgs give (-N, -npernode,
//     --npernode, --map-by ppr:<n>:...), else the worker's GPUs, else 1. Which count wins when
//     extraMPIArgs give several is not a promise of the code beyond "the first".
func FuzzMPIRun(f *testing.F) {
	job := &batch.MPIJob{}
	if err := examples.Decode("mpi-example.yaml", job); err != nil {
		f.Fatal(err)
	}
	var mca []string
	for k, v := range job.Spec.MCA {
		mca = append(mca, k+"="+v)
	}
	sort.Strings(mca)
	w := job.Spec.Worker
	f.Add(strings.Join(mca, "\n"), strings.Join(w.ExtraMPIArgs, "\x00"), strings.Join(w.Cmd, "\x00"), job.Spec.MPIHome, uint8(*w.Replicas), uint8(0))
	f.Add("plm_rsh_args=-F /etc/ssh/config\nbtl=self,tcp", "--map-by\x00ppr:4:node\x00-x\x00NCCL_DEBUG=INFO", "python3\x00train.py\x00--lr=0.1", "/opt/openmpi/", uint8(2), uint8(8))
	f.Add("", "", "hostname", "", uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, mcaText, extra, cmd, mpiHome string, replicas, gpus uint8) {
		j := &batch.MPIJob{}
		if err := examples.Decode("mpi-example.yaml", j); err != nil {
			t.Fatal(err)
		}
		j.Namespace = "ns"
		spec := &j.Spec
		spec.MCA = map[string]string{}
		if mcaText != "" {
			for _, line := range strings.Split(mcaText, "\n") {
				k, v, _ := strings.Cut(line, "=")
				spec.MCA[k] = v
			}
		}
		spec.Worker.ExtraMPIArgs, spec.Worker.Cmd, spec.MPIHome = words(extra), words(cmd), mpiHome
		spec.Worker.Replicas = ptr.To(int32(replicas))
		c := &spec.Worker.Template.Spec.Containers[0]
		c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
		j.Default()

		// The documented command, as properties rather than a second copy of MPIRun: the
		// mpirun to run, the hostfile, the job's ssh config unless the user gave plm_rsh_args,
		// each MCA parameter once, then extraMPIArgs and cmd exactly as given.
		argv := MPIRun(spec)
		tail := slices.Concat(spec.Worker.ExtraMPIArgs, spec.Worker.Cmd)
		if len(argv) < len(tail) || !slices.Equal(argv[len(argv)-len(tail):], tail) {
			t.Fatalf("MPIRun = %q does not end with extraMPIArgs and cmd %q", argv, tail)
		}
		head := argv[:len(argv)-len(tail)]
		home := strings.TrimSuffix(mpiHome, "/")
		wantStart := []string{"mpirun"}
		if home != "" {
			wantStart = []string{home + "/bin/mpirun", "--prefix", home}
		}
		wantStart = append(wantStart, "--hostfile", launcher.HostfilePath)
		if len(head) < len(wantStart) || !slices.Equal(head[:len(wantStart)], wantStart) {
			t.Fatalf("MPIRun = %q, want it to start %q", argv, wantStart)
		}
		mcas := head[len(wantStart):]
		if len(mcas)%3 != 0 {
			t.Fatalf("MPIRun = %q: between the hostfile and extraMPIArgs only --mca k v triples", argv)
		}
		seen := map[string]string{}
		for i := 0; i < len(mcas); i += 3 {
			if mcas[i] != "--mca" {
				t.Fatalf("MPIRun = %q: %q where --mca was due", argv, mcas[i])
			}
			if _, twice := seen[mcas[i+1]]; twice {
				t.Fatalf("MPIRun = %q: MCA parameter %q given twice", argv, mcas[i+1])
			}
			seen[mcas[i+1]] = mcas[i+2]
		}
		wantMCA := maps.Clone(spec.MCA)
		if _, set := wantMCA["plm_rsh_args"]; !set {
			wantMCA["plm_rsh_args"] = "-F " + spec.SSH.AuthMountPath + "/config"
		}
		if !maps.Equal(seen, wantMCA) {
			t.Fatalf("MPIRun's MCA parameters are %v, want %v", seen, wantMCA)
		}

		plan, err := Plan(j)
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		launcherPod := plan.Groups[0].Template(0)
		if got, want := launcherPod.Spec.Containers[0].Command, launcher.WaitForHosts(argv); !reflect.DeepEqual(got, want) {
			t.Fatalf("the launcher runs %q, want %q (MPIRun, once the hosts resolve)", got, want)
		}

		slots := Slots(spec.Worker.ExtraMPIArgs, spec.Worker.Template)
		wantSlots := int(gpus)
		if wantSlots == 0 {
			wantSlots = 1
		}
		args := spec.Worker.ExtraMPIArgs
	perNode:
		for i := 0; i+1 < len(args); i++ {
			switch a, next := args[i], args[i+1]; a {
			case "-N", "-npernode", "--npernode":
				if n, err := strconv.Atoi(next); err == nil && n > 0 {
					wantSlots = n
					break perNode
				}
			case "--map-by", "-map-by":
				if parts := strings.Split(next, ":"); len(parts) >= 3 && strings.EqualFold(parts[0], "ppr") {
					if n, err := strconv.Atoi(parts[1]); err == nil && n > 0 {
						wantSlots = n
						break perNode
					}
				}
			}
		}
		if slots != wantSlots || slots < 1 {
			t.Fatalf("Slots(%q) with %d GPUs = %d, want %d", args, gpus, slots, wantSlots)
		}
		hostfile := hostfileOf(t, plan)
		lines := strings.Split(strings.TrimSuffix(hostfile, "\n"), "\n")
		if hostfile == "" {
			lines = nil
		}
		if len(lines) != int(replicas) || (replicas > 0 && !strings.HasSuffix(hostfile, "\n")) {
			t.Fatalf("hostfile %q for %d workers", hostfile, replicas)
		}
		for i, line := range lines {
			host, slotsText, ok := strings.Cut(line, " slots=")
			n, err := strconv.Atoi(slotsText)
			if !ok || err != nil || host != launcher.WorkerHost(j.Name, int32(i)) || n != slots {
				t.Fatalf("hostfile line %d %q, want %s slots=%d", i, line, launcher.WorkerHost(j.Name, int32(i)), slots)
			}
		}
	})
}
