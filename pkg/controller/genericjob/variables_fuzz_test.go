package genericjob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/examples"
	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// fuzzJob is the job the variable fuzzer resolves against: two types, and with service its
// ports.
func fuzzJob(service bool) *batch.GenericJob {
	job := &batch.GenericJob{Spec: batch.GenericJobSpec{ReplicaSpecs: []batch.GenericReplicaSpec{
		{Type: "master", Replicas: ptr.To[int32](1)},
		{Type: "worker", Replicas: ptr.To[int32](4)},
	}}}
	job.Name = "gj"
	if service {
		job.Spec.Service = &batch.ServiceOption{Ports: []batch.ServicePort{{Name: "http", Port: 2222}, {Name: "grpc", Port: 8470}}}
	}
	return job
}

// templateStrings are the strings of a GenericJob's templates that variables are replaced in.
func templateStrings(job *batch.GenericJob) []string {
	var out []string
	for _, r := range job.Spec.ReplicaSpecs {
		for _, c := range append(r.Template.Spec.InitContainers, r.Template.Spec.Containers...) {
			out = append(out, c.Command...)
			out = append(out, c.Args...)
			for _, e := range c.Env {
				out = append(out, e.Value)
			}
		}
	}
	return out
}

// variableSeeds are the documented examples' strings (examples/, as the docs print them, and
// examples/pytorch), the docs' table of variables, and what Kubernetes itself expands.
func variableSeeds(f *testing.F) []string {
	var seeds []string
	for _, name := range examples.Names() {
		job := &batch.GenericJob{}
		if err := examples.Decode(name, job); err != nil || job.Kind != "GenericJob" {
			continue
		}
		seeds = append(seeds, templateStrings(job)...)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "pytorch", "allreduce.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		job := &batch.GenericJob{}
		if yaml.Unmarshal([]byte(doc), job) == nil && job.Kind == "GenericJob" {
			seeds = append(seeds, templateStrings(job)...)
		}
	}
	if len(seeds) == 0 {
		f.Fatal("no seeds from the examples")
	}
	return append(seeds,
		"$(type)-$(rank)", "n=$(replicas[master]),$(replicas[worker])",
		"$(service.master[0].host):$(service.port[http])", "$(service.worker[3].host)",
		"$(HOME)/$(type)", "$$(rank)", "$$$(rank)", "$(rank", "$()", "$", "$(replicas[$(type)])",
		"$(service.worker[x].host)", "$(replicas[ps])", "$(service.port[grpc])")
}

// kubeletExpand expands s the way the kubelet expands command, args and env values with
// Kubernetes' documented $(VAR_NAME) syntax: "$$" is a literal "$", "$(" starts a name that
// runs to the first ")" (a name lookup finds nothing for is written back as it was), and a
// "$(" that no ")" closes is text. It is the oracle of FuzzVariables: GenericJob variables
// are to behave exactly as if they were environment variables of the container.
func kubeletExpand(s string, lookup func(name string) (string, bool)) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			out.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			out.WriteByte('$')
			i++
		case '(':
			closing := strings.IndexByte(s[i+2:], ')')
			if closing < 0 {
				out.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+closing]
			if value, ok := lookup(name); ok {
				out.WriteString(value)
			} else {
				out.WriteString("$(" + name + ")")
			}
			i += 2 + closing
		default:
			out.WriteByte('$')
		}
	}
	return out.String()
}

// envName is a name the fuzzer's container defines as an environment variable: any C
// identifier the GenericJob variables do not use.
func envName(name string) bool {
	if name == "" || name == "type" || name == "rank" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// FuzzVariables resolves any string for any replica of a job with and without spec.service.
// What the code promises (variables.go, resolve):
//   - no panic;
//   - a string without "$(" is returned as it is;
//   - an error names a $(...) reference of the string;
//   - a resolved string is stable: resolving it again changes nothing (values are DNS names
//     and numbers, and are never read again);
//   - GenericJob variables act exactly like environment variables the kubelet expands: the
//     kubelet's expansion of the result equals its expansion of the input with the
//     variables defined (escaped "$$(...)", unknown and unclosed references untouched);
//   - Plan fails exactly when the string has a variable that cannot be resolved, and every
//     replica's command, args and env values are the string resolved for that replica.
func FuzzVariables(f *testing.F) {
	for _, s := range variableSeeds(f) {
		f.Add(s, uint8(1), uint8(2), true)
		f.Add(s, uint8(0), uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, s string, typeIndex, rankSeed uint8, service bool) {
		job := fuzzJob(service)
		spec := job.Spec.ReplicaSpecs[int(typeIndex)%len(job.Spec.ReplicaSpecs)]
		replicaType, rank := spec.Type, int32(rankSeed)%*spec.Replicas
		vars := newVariables(job)
		out, err := vars.resolve(s, replicaType, rank)
		if !strings.Contains(s, "$(") && (out != s || err != nil) {
			t.Fatalf("resolve(%q) = %q, %v: a string without $( must stay as it is", s, out, err)
		}
		if err != nil {
			msg := err.Error()
			ref := msg[:strings.IndexByte(msg, ')')+1] // a reference has no ")" inside
			if !strings.HasPrefix(ref, "$(") || !strings.Contains(s, ref) {
				t.Fatalf("resolve(%q): error %q does not start with a reference of the string", s, msg)
			}
		} else {
			again, err2 := vars.resolve(out, replicaType, rank)
			if again != out || err2 != nil {
				t.Fatalf("resolve(%q) = %q, and again = %q, %v: not stable", s, out, again, err2)
			}
			env := func(name string) (string, bool) { return "<env " + name + ">", envName(name) }
			withVars := func(name string) (string, bool) {
				if v, err := vars.value(name, replicaType, rank); err == nil && v != nil {
					return *v, true
				}
				return env(name)
			}
			if got, want := kubeletExpand(out, env), kubeletExpand(s, withVars); got != want {
				t.Fatalf("resolve(%q) = %q, which the kubelet expands to %q; with the variables as environment variables it would be %q",
					s, out, got, want)
			}
		}

		// Through Plan, as the controller resolves templates.
		for i := range job.Spec.ReplicaSpecs {
			job.Spec.ReplicaSpecs[i].Template.Spec.Containers = []corev1.Container{{Name: "main",
				Command: []string{s}, Args: []string{"--x", s}, Env: []corev1.EnvVar{{Name: "V", Value: s}}}}
			job.Spec.ReplicaSpecs[i].Template.Spec.InitContainers = []corev1.Container{{Name: "init", Args: []string{s}}}
		}
		job.Default()
		plan, planErr := Plan(job)
		if (planErr != nil) != (err != nil) {
			t.Fatalf("resolve(%q) error %v, but Plan error %v", s, err, planErr)
		}
		if planErr != nil {
			return
		}
		for _, g := range plan.Groups {
			for r := range g.Replicas {
				want, _ := vars.resolve(s, g.Type, r)
				tmpl := g.Template(r)
				c, init := tmpl.Spec.Containers[0], tmpl.Spec.InitContainers[0]
				if c.Command[0] != want || c.Args[0] != "--x" || c.Args[1] != want || c.Env[0].Value != want || init.Args[0] != want {
					t.Fatalf("replica %s %d of %q: command %q, args %q, env %q, init args %q; want %q", g.Type, r, s,
						c.Command, c.Args, c.Env[0].Value, init.Args, want)
				}
			}
		}
	})
}

// TestVariablesFollowKubeletSyntax keeps what FuzzVariables found (testdata/fuzz/FuzzVariables):
// resolve replaced every $(...) it recognised wherever it stood, so "$$(rank)0", which the
// kubelet turns into the literal "$(rank)0", became "$20", and the escaped
// "$$(service. 0000000000000)" failed the job as a malformed variable. A reference is now
// read as the kubelet reads it: "$$" escapes, and a name runs to the first ")".
func TestVariablesFollowKubeletSyntax(t *testing.T) {
	vars := newVariables(fuzzJob(true))
	cases := []struct{ in, want, err string }{
		{in: "$$(rank)0", want: "$$(rank)0"},
		{in: "$$(service. 0000000000000)", want: "$$(service. 0000000000000)"},
		{in: "$$$(rank)", want: "$$2"},
		{in: "echo $$ $(rank)", want: "echo $$ 2"},
		{in: "$(rank", want: "$(rank"},
		{in: "$(HOME$(rank))", want: "$(HOME$(rank))"},
		{in: "$(replicas[$(type)])", err: "$(replicas[$(type) is malformed"},
	}
	for _, tc := range cases {
		got, err := vars.resolve(tc.in, "worker", 2)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("resolve(%q) error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
