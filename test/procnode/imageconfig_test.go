package procnode

import (
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
)

// The command, environment and working directory of a container of an image, as Kubernetes
// defines them: command replaces Entrypoint and drops Cmd, args replaces Cmd, both expanded
// with the container's environment (not the image's), which overrides the image's by name.
func TestImageConfig(t *testing.T) {
	img := &v1.Config{Entrypoint: []string{"/entry", "e1"}, Cmd: []string{"c1", "$(X)"}, WorkingDir: "/img",
		Env: []string{"PATH=/image/bin", "X=image", "KEEP=1"}}
	env := []string{"X=pod", "Y=why"}
	for _, c := range []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"neither", nil, nil, []string{"/entry", "e1", "c1", "$(X)"}},
		{"command", []string{"/run", "$(X)"}, nil, []string{"/run", "pod"}},
		{"args", nil, []string{"a", "$(Y)"}, []string{"/entry", "e1", "a", "why"}},
		{"both", []string{"/run"}, []string{"a"}, []string{"/run", "a"}},
	} {
		got, err := command(&corev1.Container{Name: "c", Command: c.command, Args: c.args}, env, img)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q (%v), want %q", c.name, got, err, c.want)
		}
	}
	if _, err := command(&corev1.Container{Name: "c"}, env, &v1.Config{}); err == nil {
		t.Error("an image with no command ran")
	}

	got := processEnv(env, img.Env, "/home/u", "/", "host")
	want := []string{"PATH=/image/bin", "X=pod", "KEEP=1", "Y=why", "HOME=/home/u", "HOSTNAME=host"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("image env: %q, want %q", got, want)
	}
	got = processEnv([]string{"HOSTNAME=mine"}, nil, "", "/root", "host")
	want = []string{"HOSTNAME=mine", "PATH=" + defaultPath, "HOME=/root"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("machine env: %q, want %q", got, want)
	}

	if d := workingDir(&corev1.Container{}, img); d != "/img" {
		t.Errorf("workingDir %q, want the image's", d)
	}
	if d := workingDir(&corev1.Container{WorkingDir: "/mine"}, img); d != "/mine" {
		t.Errorf("workingDir %q, want the container's", d)
	}
	if d := workingDir(&corev1.Container{}, nil); d != "" {
		t.Errorf("workingDir %q, want none", d)
	}
}
