package procnode

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// envInputs are what a container's environment is made of besides its pod.
type envInputs struct {
	kube  kubernetes.Interface
	podIP string
	// services are the variables of the Services the pod sees (svcenv.go), KEY=VALUE.
	services []string
}

// containerEnv is a container's environment as a kubelet makes it: envFrom first, then env in
// order, each value with $(VAR) references to earlier variables (and to the Services'
// variables) expanded; field and resource references, and Secret and ConfigMap keys, read
// from the API; then the Services' variables the container does not set. The image's
// variables and the runtime's (PATH, HOME, HOSTNAME) are added later (processEnv).
func containerEnv(ctx context.Context, in envInputs, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	kube := in.kube
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	services := map[string]string{}
	for _, kv := range in.services {
		k, v, _ := strings.Cut(kv, "=")
		services[k] = v
	}
	lookup := func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		v, ok := services[name]
		return v, ok
	}
	for _, from := range c.EnvFrom {
		data, err := sourceData(ctx, kube, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v := expandWith(e.Value, lookup)
		if s := e.ValueFrom; s != nil {
			var err error
			if v, err = valueFrom(ctx, kube, pod, in.podIP, c, s); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		set(e.Name, v)
	}
	for _, kv := range in.services {
		if k, v, _ := strings.Cut(kv, "="); !hasVar(vars, k) {
			set(k, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func sourceData(ctx context.Context, kube kubernetes.Interface, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	optional := func(o *bool) bool { return o != nil && *o }
	switch {
	case from.ConfigMapRef != nil:
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, err
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, err
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

func valueFrom(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, podIP string, c *corev1.Container, s *corev1.EnvVarSource) (string, error) {
	switch {
	case s.FieldRef != nil:
		return fieldValue(pod, podIP, s.FieldRef.FieldPath)
	case s.ResourceFieldRef != nil:
		return resourceValue(pod, c, s.ResourceFieldRef)
	case s.SecretKeyRef != nil:
		sec, err := kube.CoreV1().Secrets(pod.Namespace).Get(ctx, s.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := sec.Data[s.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("Secret %s has no key %s", s.SecretKeyRef.Name, s.SecretKeyRef.Key)
		}
		return string(v), nil
	case s.ConfigMapKeyRef != nil:
		cm, err := kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, s.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[s.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %s", s.ConfigMapKeyRef.Name, s.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", nil
}

// fieldValue reads a downward-API field of the pod.
func fieldValue(pod *corev1.Pod, podIP, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP":
		return podIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("field %s is not supported", path)
}

func hasVar(vars map[string]string, k string) bool {
	_, ok := vars[k]
	return ok
}

// expand replaces $(VAR) with the value of VAR where it is defined, as Kubernetes does:
// $$ is a literal $, and a reference to an undefined variable stays as written.
func expand(s string, vars map[string]string) string {
	return expandWith(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// expandWith is expand with the variables of lookup.
func expandWith(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
