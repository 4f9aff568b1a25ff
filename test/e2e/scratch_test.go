package e2e

import (
	"os"
	"path/filepath"
	"sync"
)

// The suite's scratch directories: what it makes once for all its tests (the controller's
// binary and log and its kubeconfig, the kubectl plugin, the controller's image, the
// release). They go when the suite ends, as the cluster's directory does; a failed run keeps
// the controller's logs (and only them: its binary is 50 MB, the kubeconfig holds a token).
var scratch struct {
	mu   sync.Mutex
	dirs []string
	logs string // the directory whose *.log files a failed run keeps
}

// scratchDir makes a directory, as os.MkdirTemp does, that goes when the suite ends.
func scratchDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	scratch.mu.Lock()
	defer scratch.mu.Unlock()
	scratch.dirs = append(scratch.dirs, dir)
	return dir, nil
}

// keepLogsOf marks a scratch directory whose logs a failed run keeps.
func keepLogsOf(dir string) {
	scratch.mu.Lock()
	defer scratch.mu.Unlock()
	scratch.logs = dir
}

// removeScratch removes the scratch directories, but for the logs when the run failed.
func removeScratch(failed bool) {
	scratch.mu.Lock()
	defer scratch.mu.Unlock()
	for _, dir := range scratch.dirs {
		if !failed || dir != scratch.logs {
			_ = os.RemoveAll(dir)
			continue
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if filepath.Ext(e.Name()) != ".log" {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	scratch.dirs = nil
}
