package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The processes of the real node's containers, as this machine sees them. containerd with
// runc and the kubelet's cgroupfs driver put each container in cgroups of its own, whose
// paths end in the container's ID (on this cgroup v1 machine, one per hierarchy:
// /kubepods/<QoS class>/pod<uid>/<ID>), and give it a PID namespace of its own, in which its
// command is pid 1.

// containerPids lists the machine's pids of the processes of a container of the real node,
// named by its ID as the pod's status gives it (containerd://<ID>).
func containerPids(containerID string) ([]int, error) {
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok || id == "" {
		return nil, fmt.Errorf("container ID %q is not containerd's", containerID)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(data), "\n") {
			// hierarchy-ID:controllers:path
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && filepath.Base(parts[2]) == id {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// containerInit is the machine's pid of the first process of a pod's container on the real
// node: the container's command, pid 1 in its PID namespace (the last pid of NSpid).
func containerInit(t *testing.T, pod *corev1.Pod, container string) int {
	t.Helper()
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			id = s.ContainerID
		}
	}
	if id == "" {
		t.Fatalf("pod %s has no running container %s", pod.Name, container)
	}
	pids, err := containerPids(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if nspid := strings.Fields(procStatusField(pid, "NSpid")); len(nspid) > 1 && nspid[len(nspid)-1] == "1" {
			return pid
		}
	}
	t.Fatalf("no process of container %s of pod %s (%s) is its pid 1; its processes: %v", container, pod.Name, id, pids)
	return 0
}

// procStatusField is a field of /proc/<pid>/status, its words joined by single spaces ("" when
// the process or the field is not there).
func procStatusField(pid int, field string) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

// cgroupFile reads a file of the cgroup of a process in a cgroup v1 hierarchy (a controller:
// memory, cpu, pids, ...), e.g. memory.limit_in_bytes.
func cgroupFile(pid int, controller, file string) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				value, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], file))
				return strings.TrimSpace(string(value)), err
			}
		}
	}
	return "", fmt.Errorf("process %d is in no %s cgroup", pid, controller)
}

// processesWith lists the machine's processes whose command line contains s: the real node's
// containers' too, which run in PID namespaces of their own but are this machine's processes.
func processesWith(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), s) {
			out = append(out, e.Name())
		}
	}
	return out
}
