package procnode

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
)

// How a container's image and its spec make the process, as Kubernetes defines it: command
// replaces the image's Entrypoint and drops its Cmd; args replaces Cmd; both are expanded with
// the container's environment ($(VAR)), which also overrides the image's Env by name;
// workingDir replaces the image's WorkingDir. A container of the machine's programs (no
// image) has neither Entrypoint nor Cmd nor Env, so it must name its command.

// defaultPath is the PATH of a process whose image and container set none (a container
// runtime's).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// command is what a container runs: its command and args, or the image's Entrypoint and Cmd
// where they give none, with $(VAR) expanded from env (the container's, not the image's).
// img is nil for the machine's programs.
func command(c *corev1.Container, env []string, img *v1.Config) ([]string, error) {
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	expanded := func(in []string) []string {
		out := make([]string, len(in))
		for i := range in {
			out[i] = expand(in[i], vars)
		}
		return out
	}
	var argv []string
	switch {
	case img == nil:
		argv = append(expanded(c.Command), expanded(c.Args)...)
		if len(argv) == 0 {
			return nil, fmt.Errorf("container %s names no command: the process node runs the machine's programs for an image it was not given", c.Name)
		}
		return argv, nil
	case len(c.Command) > 0:
		argv = append(expanded(c.Command), expanded(c.Args)...)
	case len(c.Args) > 0:
		argv = append(append([]string{}, img.Entrypoint...), expanded(c.Args)...)
	default:
		argv = append(append([]string{}, img.Entrypoint...), img.Cmd...)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %s: no command specified (neither the container nor its image names one)", c.Name)
	}
	return argv, nil
}

// processEnv is the command's environment: the image's variables (their values replaced by the
// container's of the same name), then the container's others; PATH when neither sets it;
// HOME, the user's home (else fallbackHome), and HOSTNAME, when the container does not set
// them.
func processEnv(containerEnv, imageEnv []string, home, fallbackHome, hostname string) []string {
	var out []string
	index := map[string]int{}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, e := range imageEnv {
		set(e)
	}
	for _, e := range containerEnv {
		set(e)
	}
	if home == "" {
		home = fallbackHome
	}
	for _, kv := range []string{"PATH=" + defaultPath, "HOME=" + home, "HOSTNAME=" + hostname} {
		if k, _, _ := strings.Cut(kv, "="); !has(index, k) {
			set(kv)
		}
	}
	return out
}

// workingDir is where the command starts: the container's workingDir, else the image's, else
// the root.
func workingDir(c *corev1.Container, img *v1.Config) string {
	switch {
	case c.WorkingDir != "":
		return c.WorkingDir
	case img != nil && img.WorkingDir != "":
		return img.WorkingDir
	}
	return ""
}

func has(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}
