package procnode

import (
	"os"

	"github.com/creack/pty"
)

// openStdio makes the files a container's command gets as its stdin, stdout and stderr, and
// keeps the node's ends: the output goes to the container's log (logs.go) and to attached
// clients; stdin, with spec.stdin, is kept for `kubectl attach -i` (otherwise it is
// /dev/null). With spec.tty the command gets one terminal for all three, read as stdout.
func (ct *container) openStdio(logPath string) ([]*os.File, error) {
	if ct.spec.TTY {
		master, tty, err := pty.Open()
		if err != nil {
			return nil, err
		}
		out, err := newOutput(logPath, 1)
		if err != nil {
			master.Close()
			tty.Close()
			return nil, err
		}
		ct.out, ct.tty = out, master
		if ct.spec.Stdin {
			ct.stdin = nopCloser{master} // the output's copy closes the terminal
		}
		go out.copy("stdout", master)
		return []*os.File{tty, tty, tty}, nil
	}
	var files, mine []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range append(files, mine...) {
			f.Close()
		}
		return nil, err
	}
	if ct.spec.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		files, mine = append(files, r), append(mine, w)
	} else {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		files = append(files, null)
	}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		files, mine = append(files, w), append(mine, r)
	}
	out, err := newOutput(logPath, 2)
	if err != nil {
		return fail(err)
	}
	ct.out = out
	if ct.spec.Stdin {
		ct.stdin, mine = mine[0], mine[1:]
	}
	go out.copy("stdout", mine[0])
	go out.copy("stderr", mine[1])
	return files, nil
}

// closeStdin closes the command's stdin (spec.stdinOnce after an attach, or the container's
// end).
func (ct *container) closeStdin() {
	ct.stdinOnce.Do(func() {
		if ct.stdin != nil {
			_ = ct.stdin.Close()
		}
	})
}

type nopCloser struct{ *os.File }

func (nopCloser) Close() error { return nil }
