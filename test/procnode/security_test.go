package procnode

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A container's security: the user and groups from runAsUser or the image's User (names
// looked up in the root's files), runAsNonRoot refused with the kubelet's words, the
// capabilities' bounding set, no_new_privs and the read-only root.
func TestSecurityFor(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n",
		"group":  "root:x:0:\napp:x:1001:\nstaff:x:50:app,other\nwheel:x:10:root\n",
	} {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	type want struct {
		uid, gid uint32
		groups   []uint32
		home     string
		err      string
	}
	for _, c := range []struct {
		name      string
		podSC     *corev1.PodSecurityContext
		sc        *corev1.SecurityContext
		imageUser string
		want      want
	}{
		{name: "image user by name", imageUser: "app", want: want{uid: 1000, gid: 1001, groups: []uint32{50}, home: "/home/app"}},
		{name: "image user and group by number", imageUser: "1000:7", want: want{uid: 1000, gid: 7, groups: []uint32{50}, home: "/home/app"}},
		{name: "image group by name", imageUser: "1000:staff", want: want{uid: 1000, gid: 50, home: "/home/app"}},
		{name: "unknown uid", imageUser: "4242", want: want{uid: 4242}},
		{name: "no user: root", want: want{groups: []uint32{10}, home: "/root"}},
		{name: "runAsUser wins over the image", imageUser: "app:staff", sc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
			want: want{uid: 1000, gid: 1001, groups: []uint32{50}, home: "/home/app"}},
		{name: "the container wins over the pod", podSC: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](5), RunAsGroup: ptr.To[int64](6),
			SupplementalGroups: []int64{70}, FSGroup: ptr.To[int64](80)}, sc: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](9)},
			want: want{uid: 5, gid: 9, groups: []uint32{70, 80}}},
		{name: "unknown user name", imageUser: "nobody", want: want{err: "unable to find user nobody"}},
		{name: "runAsNonRoot, image root", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			want: want{err: `container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: main)`}},
		{name: "runAsNonRoot, image uid 0", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, imageUser: "0:0",
			want: want{err: "image will run as root"}},
		{name: "runAsNonRoot, image user a name", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, imageUser: "app",
			want: want{err: `container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: "p_ns(u1)", container: main)`}},
		{name: "runAsNonRoot, runAsUser 0", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}, imageUser: "app",
			want: want{err: `container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: main)`}},
		{name: "runAsNonRoot, runAsUser 1000", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
			want: want{uid: 1000, gid: 1001, groups: []uint32{50}, home: "/home/app"}},
	} {
		pod.Spec.SecurityContext = c.podSC
		ctr := &corev1.Container{Name: "main", SecurityContext: c.sc}
		got, err := securityFor(pod, ctr, c.imageUser, root, true)
		if c.want.err != "" {
			var ce configError
			if err == nil || !strings.Contains(err.Error(), c.want.err) || !errors.As(err, &ce) {
				t.Errorf("%s: got %v, want the config error %q", c.name, err, c.want.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.UID != c.want.uid || got.GID != c.want.gid || !reflect.DeepEqual(got.Groups, c.want.groups) || got.Home != c.want.home || !got.SetUser {
			t.Errorf("%s: got %d:%d %v home %q, want %d:%d %v home %q", c.name, got.UID, got.GID, got.Groups, got.Home,
				c.want.uid, c.want.gid, c.want.groups, c.want.home)
		}
	}
}

func TestCapabilities(t *testing.T) {
	names := func(caps *[]int) string {
		if caps == nil {
			return "unchanged"
		}
		var out []string
		for _, c := range *caps {
			out = append(out, capabilityNames[c])
		}
		return strings.Join(out, ",")
	}
	defaults := "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,SETGID,SETUID,SETPCAP,NET_BIND_SERVICE,NET_RAW,SYS_CHROOT,MKNOD,AUDIT_WRITE,SETFCAP"
	for _, c := range []struct {
		name      string
		sc        corev1.SecurityContext
		fromImage bool
		want      string
	}{
		{name: "image, nothing said", fromImage: true, want: defaults},
		{name: "machine, nothing said", want: "unchanged"},
		{name: "drop ALL", sc: corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}, want: ""},
		{name: "drop ALL, add one", fromImage: true,
			sc: corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CAP_NET_ADMIN"}}}, want: "NET_ADMIN"},
		{name: "add ALL, drop one", fromImage: true,
			sc: corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"ALL"}, Drop: []corev1.Capability{"net_raw"}}}},
		{name: "add and drop the same", fromImage: true,
			sc:   corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}, Drop: []corev1.Capability{"SYS_ADMIN", "KILL"}}},
			want: strings.Replace(defaults, "KILL,", "", 1)},
		{name: "privileged", fromImage: true, sc: corev1.SecurityContext{Privileged: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}, want: "unchanged"},
	} {
		caps, err := capabilities(c.sc, c.fromImage)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := names(caps)
		if c.name == "add ALL, drop one" {
			if strings.Contains(got, "NET_RAW") || !strings.Contains(got, "SYS_ADMIN") || !strings.Contains(got, "CHECKPOINT_RESTORE") {
				t.Errorf("%s: %s", c.name, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if _, err := capabilities(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"FLY"}}}, true); err == nil {
		t.Error("an unknown capability was taken")
	}
}

// The pod's security context under the container's: the container's fields win, the pod's
// fill in.
func TestEffectiveSecurityContext(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), RunAsGroup: ptr.To[int64](2), RunAsNonRoot: ptr.To(true)}}}
	sc := effectiveSecurityContext(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](3), ReadOnlyRootFilesystem: ptr.To(true)}})
	if *sc.RunAsUser != 3 || *sc.RunAsGroup != 2 || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%+v", sc)
	}
	sec, err := securityFor(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)}}, "", t.TempDir(), false)
	if err != nil || !sec.NoNewPrivs || !sec.ReadOnlyRoot || sec.Capabilities != nil {
		t.Errorf("%+v, %v", sec, err)
	}
}
