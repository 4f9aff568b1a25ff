package genericjob

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

var (
	replicasVar    = regexp.MustCompile(`^replicas\[([^\]]*)\]$`)
	servicePortVar = regexp.MustCompile(`^service\.port\[([^\]]*)\]$`)
	serviceHostVar = regexp.MustCompile(`^service\.([^\[\]]+)\[([^\]]*)\]\.host$`)
)

// variables resolves the $(...) variables of one job.
type variables struct {
	job      string
	replicas map[string]int32
	ports    map[string]int32 // nil without spec.service
}

func newVariables(job *batch.GenericJob) *variables {
	v := &variables{job: job.Name, replicas: map[string]int32{}}
	for _, r := range job.Spec.ReplicaSpecs {
		v.replicas[r.Type] = *r.Replicas
	}
	if job.Spec.Service != nil {
		v.ports = map[string]int32{}
		for _, p := range job.Spec.Service.Ports {
			v.ports[p.Name] = p.Port
		}
	}
	return v
}

// resolve replaces the variables of s for the replica (type, rank), or says which variable
// cannot be resolved and how to fix it. s is read the way the kubelet reads it afterwards
// (Kubernetes' $(VAR_NAME) expansion): "$$" is an escaped "$", "$(" opens a reference that
// runs to the first ")", and a "$(" without a ")" is plain text. Only the references of the
// GenericJob docs are replaced; everything else, Kubernetes' own $(ENV_VAR) references and
// escaped "$$(...)" included, is kept as it is, for the kubelet. One pass: a value is never
// read again, so resolving the result again changes nothing.
func (v *variables) resolve(s, replicaType string, rank int32) (string, error) {
	if !strings.Contains(s, "$(") {
		return s, nil
	}
	var b strings.Builder
	var firstErr error
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i+1 >= len(s) {
			b.WriteString(s)
			return b.String(), firstErr
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$': // an escaped "$": kept, the kubelet unescapes it
			b.WriteString("$$")
			s = s[i+2:]
			continue
		case '(':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i+2:], ')')
		if end < 0 { // "$(" without ")": text, to the end
			b.WriteString(s[i:])
			return b.String(), firstErr
		}
		ref := s[i : i+2+end+1]
		s = s[i+len(ref):]
		value, err := v.value(ref[2:len(ref)-1], replicaType, rank)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s %w", ref, err)
		}
		if err != nil || value == nil {
			b.WriteString(ref)
			continue
		}
		b.WriteString(*value)
	}
}

// value returns a variable's value, nil for a $(...) that is not ours.
func (v *variables) value(name, replicaType string, rank int32) (*string, error) {
	str := func(s string) *string { return &s }
	switch {
	case name == "type":
		return str(replicaType), nil
	case name == "rank":
		return str(strconv.Itoa(int(rank))), nil
	case strings.HasPrefix(name, "replicas["):
		m := replicasVar.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("is malformed: write $(replicas[<type>])")
		}
		n, ok := v.replicas[m[1]]
		if !ok {
			return nil, fmt.Errorf("names replica type %q, which spec.replicaSpecs does not have", m[1])
		}
		return str(strconv.Itoa(int(n))), nil
	case strings.HasPrefix(name, "service."):
		if v.ports == nil {
			return nil, fmt.Errorf("needs spec.service: add spec.service.ports (for example [{name: http, port: 2222}]) to expose the replicas")
		}
		if m := servicePortVar.FindStringSubmatch(name); m != nil {
			port, ok := v.ports[m[1]]
			if !ok {
				return nil, fmt.Errorf("names port %q, which spec.service.ports does not have", m[1])
			}
			return str(strconv.Itoa(int(port))), nil
		}
		m := serviceHostVar.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("is malformed: write $(service.<type>[<rank>].host) or $(service.port[<name>])")
		}
		n, ok := v.replicas[m[1]]
		if !ok {
			return nil, fmt.Errorf("names replica type %q, which spec.replicaSpecs does not have", m[1])
		}
		r, err := strconv.Atoi(m[2])
		if err != nil || r < 0 || int32(r) >= n {
			return nil, fmt.Errorf("names rank %s of type %q, which has ranks 0 to %d", m[2], m[1], n-1)
		}
		return str(engine.ChildName(v.job, m[1], int32(r))), nil
	default:
		return nil, nil
	}
}

// resolveTemplate returns a copy of the replica's template with its variables replaced in
// the command, args and env values of every container and init container.
func (v *variables) resolveTemplate(tmpl *corev1.PodTemplateSpec, field, replicaType string, rank int32) (corev1.PodTemplateSpec, error) {
	out := *tmpl.DeepCopy()
	var firstErr error
	fix := func(path string, s *string) {
		resolved, err := v.resolve(*s, replicaType, rank)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s.%s: %w", field, path, err)
		}
		*s = resolved
	}
	each := func(kind string, containers []corev1.Container) {
		for i := range containers {
			c := &containers[i]
			for j := range c.Command {
				fix(fmt.Sprintf("spec.%s[%d].command[%d]", kind, i, j), &c.Command[j])
			}
			for j := range c.Args {
				fix(fmt.Sprintf("spec.%s[%d].args[%d]", kind, i, j), &c.Args[j])
			}
			for j := range c.Env {
				fix(fmt.Sprintf("spec.%s[%d].env[%s].value", kind, i, c.Env[j].Name), &c.Env[j].Value)
			}
		}
	}
	each("initContainers", out.Spec.InitContainers)
	each("containers", out.Spec.Containers)
	return out, firstErr
}
