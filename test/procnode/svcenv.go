package procnode

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// serviceEnv lists the variables a kubelet gives every container of a pod for the Services it
// may reach: the API server's (kubernetes in default), always, and, unless the pod sets
// enableServiceLinks false, every Service of its namespace with a cluster IP. Per Service
// <NAME> (upper case, - as _): <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT (its first port) and
// <NAME>_SERVICE_PORT_<PORT NAME> per named port, and Docker's link variables: <NAME>_PORT
// (proto://ip:port of the first port), and per port <NAME>_PORT_<port>_<PROTO> with _PROTO,
// _PORT and _ADDR.
func serviceEnv(all []*corev1.Service, pod *corev1.Pod) []string {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*corev1.Service{}
	for _, s := range all {
		if !hasClusterIP(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		if s.Namespace == "default" && s.Name == "kubernetes" {
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		} else if s.Namespace == pod.Namespace && links {
			byName[s.Name] = s // a Service of the pod's namespace named kubernetes wins
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		out = append(out, serviceVars(byName[n])...)
	}
	return out
}

// hasClusterIP tells whether a Service has a virtual address (not headless, not ExternalName).
func hasClusterIP(s *corev1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone
}

func serviceVars(s *corev1.Service) []string {
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out := []string{prefix + "_SERVICE_HOST=" + ip, fmt.Sprintf("%s_SERVICE_PORT=%d", prefix, s.Spec.Ports[0].Port)}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, fmt.Sprintf("%s_SERVICE_PORT_%s=%d", prefix, envName(p.Name), p.Port))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
		if i == 0 {
			out = append(out, prefix+"_PORT="+url)
		}
		port := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out, port+"="+url, port+"_PROTO="+strings.ToLower(proto), fmt.Sprintf("%s_PORT=%d", port, p.Port), port+"_ADDR="+ip)
	}
	return out
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
