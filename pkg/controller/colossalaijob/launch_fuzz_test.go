package colossalaijob

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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

// colossalaiTorchrunArgs is what `colossalai run` makes of its --extra_launch_args for
// torchrun, as its documented behaviour has it: the value split at ",", each piece "k=v" or
// a bare "k" (more than one "=" in a piece stops it with an error), a key given again
// replacing its value in place, and each written back as "--k=v", or "--k" when v is empty.
func colossalaiTorchrunArgs(extra string) ([]string, error) {
	var keys []string
	values := map[string]string{}
	for _, piece := range strings.Split(extra, ",") {
		if strings.Count(piece, "=") > 1 {
			return nil, fmt.Errorf("%q has more than one =", piece)
		}
		k, v, _ := strings.Cut(piece, "=")
		if _, seen := values[k]; !seen {
			keys = append(keys, k)
		}
		values[k] = v
	}
	var out []string
	for _, k := range keys {
		if values[k] == "" {
			out = append(out, "--"+k)
		} else {
			out = append(out, "--"+k+"="+values[k])
		}
	}
	return out, nil
}

// torchrunReads is how torchrun's option parser reads torchArgs given to it directly, each
// option as "--k=v" or "--k": "--k=v", "--k v" (v not an option) and "--k" alone. ok is
// false for an argument that is not an option (torchrun would take it as the script).
func torchrunReads(args []string) (out []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return nil, false
		}
		if !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			a += "=" + args[i+1]
			i++
		}
		out = append(out, a)
	}
	return out, true
}

// FuzzColossalAIRun builds the documented ColossalAIJob example with any torchArgs, command,
// procPerWorker and worker count. What the code promises (adapter.go, Run and
// ExtraLaunchArgs, and launcher.Layout's hostfile):
//   - no panic;
//   - the launcher runs colossalai run over the hostfile with worker 0 as master, then the
//     user's command exactly as given: every argument once, in order;
//   - torchArgs reach torchrun as torchrun would read them if given directly: what
//     colossalai run makes of --extra_launch_args equals them (torchArgs that cannot pass
//     that way fail the job before anything is created);
//   - the hostfile parses back to one worker host per line, in rank order.
func FuzzColossalAIRun(f *testing.F) {
	job := &batch.ColossalAIJob{}
	if err := examples.Decode("colossalai-example.yaml", job); err != nil {
		f.Fatal(err)
	}
	w := job.Spec.Worker
	f.Add(strings.Join(w.TorchArgs, "\x00"), strings.Join(w.Command, "\x00"), uint8(*w.ProcPerWorker), uint8(*w.Replicas))
	f.Add("--max_restarts=3\x00--rdzv_backend\x00c10d\x00--standalone", "train.py\x00--lr\x000.1", uint8(8), uint8(4))
	f.Add("--standalone\x00--nnodes=1\x00--max_restarts\x002", "train.py", uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, torchArgs, command string, procs, replicas uint8) {
		j := &batch.ColossalAIJob{}
		if err := examples.Decode("colossalai-example.yaml", j); err != nil {
			t.Fatal(err)
		}
		j.Namespace = "ns"
		spec := &j.Spec
		spec.Worker.TorchArgs, spec.Worker.Command = words(torchArgs), words(command)
		spec.Worker.ProcPerWorker, spec.Worker.Replicas = ptr.To(int32(procs)), ptr.To(int32(replicas))
		j.Default()

		plan, planErr := Plan(j)
		torchrun, ok := torchrunReads(spec.Worker.TorchArgs)
		if planErr != nil {
			if !strings.Contains(planErr.Error(), "spec.worker.torchArgs") {
				t.Fatalf("Plan: %v", planErr)
			}
			return
		}
		argv := plan.Groups[0].Template(0).Spec.Containers[0].Command
		if want := launcher.WaitForHosts(Run(j.Name, spec)); !reflect.DeepEqual(argv, want) {
			t.Fatalf("the launcher runs %q, want %q (Run, once the hosts resolve)", argv, want)
		}
		argv = argv[len(launcher.WaitForHosts(nil)):]
		want := []string{"colossalai", "run", "--hostfile", launcher.HostfilePath, "--master_addr", launcher.WorkerHost(j.Name, 0),
			"--master_port", fmt.Sprint(MasterPort), "--nproc_per_node", fmt.Sprint(procs)}
		rest := argv[len(want):]
		if !reflect.DeepEqual(argv[:len(want)], want) {
			t.Fatalf("Run = %q, want it to start with %q", argv, want)
		}
		if len(spec.Worker.TorchArgs) > 0 {
			if len(rest) < 2 || rest[0] != "--extra_launch_args" {
				t.Fatalf("torchArgs %q, but Run = %q", spec.Worker.TorchArgs, argv)
			}
			got, err := colossalaiTorchrunArgs(rest[1])
			if err != nil || !ok || !reflect.DeepEqual(got, torchrun) {
				t.Fatalf("torchArgs %q: --extra_launch_args %q reaches torchrun as %q (%v), want %q", spec.Worker.TorchArgs, rest[1], got, err, torchrun)
			}
			rest = rest[2:]
		}
		if !reflect.DeepEqual(rest, spec.Worker.Command) && !(len(rest) == 0 && len(spec.Worker.Command) == 0) {
			t.Fatalf("Run = %q, want it to end in the command %q", argv, spec.Worker.Command)
		}

		var hostfile string
		for _, o := range plan.Objects {
			if o.Kind == engine.ConfigMapKind {
				obj, err := o.Build(nil)
				if err != nil {
					t.Fatal(err)
				}
				hostfile = obj.(*corev1.ConfigMap).Data["hostfile"]
			}
		}
		var hosts []string
		for i := range int32(replicas) {
			hosts = append(hosts, launcher.WorkerHost(j.Name, i))
		}
		if got := strings.Fields(hostfile); !reflect.DeepEqual(got, hosts) && !(len(got) == 0 && len(hosts) == 0) {
			t.Fatalf("hostfile %q, want the hosts %q", hostfile, hosts)
		}
	})
}

// TestExtraLaunchArgsRefuses keeps what FuzzColossalAIRun found (testdata/fuzz/FuzzColossalAIRun):
// ExtraLaunchArgs trimmed dashes and joined with commas whatever it was given, so torchArgs
// ["0"] reached torchrun as --0, ["--0,"] as --0 and a bare --, and ["---"] vanished; a
// value with "=" such as --rdzv_conf=join_timeout=600 stopped colossalai run itself. Such
// torchArgs now fail the job with a message naming the argument.
func TestExtraLaunchArgsRefuses(t *testing.T) {
	cases := map[string][]string{
		"is not a torchrun option":     {"0"},
		"cannot be passed on":          {"--0,"},
		`"---" is not a torchrun`:      {"---"},
		`torchArgs[1] "join_timeout=`:  {"--rdzv_conf", "join_timeout=600"},
		"has an empty value":           {"--max_restarts="},
		"gives --nnodes a second time": {"--nnodes=1", "--nnodes", "2"},
	}
	for want, args := range cases {
		if got, err := ExtraLaunchArgs(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ExtraLaunchArgs(%q) = %q, %v; want an error containing %q", args, got, err, want)
		}
	}
	j := &batch.ColossalAIJob{}
	if err := examples.Decode("colossalai-example.yaml", j); err != nil {
		t.Fatal(err)
	}
	j.Spec.Worker.TorchArgs = []string{"--rdzv_conf=join_timeout=600"}
	j.Default()
	if _, err := Plan(j); err == nil || !strings.Contains(err.Error(), "spec.worker.torchArgs[0]") {
		t.Errorf("Plan: %v, want an error naming spec.worker.torchArgs[0]", err)
	}
}
