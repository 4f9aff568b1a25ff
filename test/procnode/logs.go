package procnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// A container's output is kept as a kubelet keeps it, in the CRI log format: one entry per
// line, "<time, RFC3339Nano> <stdout|stderr> <F|P> <text>", P for a part of a longer line
// (or an unfinished last line) and F for the rest of it. The node reads the command's
// stdout and stderr (pipes, or its terminal) itself, so that each line gets its time and its
// stream; `kubectl logs` reads the file through the node's API (kubeletapi.go), and ReadLog
// turns a file back into the plain output.

// logTime is the time format of the entries: RFC3339Nano of fixed width, as the CRI's.
const logTime = "2006-01-02T15:04:05.000000000Z07:00"

// maxLogLine is the longest entry's text: a longer line is written in parts.
const maxLogLine = 16 * 1024

// output is a container's log file, written as its command's output comes; readers follow
// it, and attached clients get the output as it comes.
type output struct {
	path string

	mu       sync.Mutex
	file     *os.File
	streams  int           // streams still open
	changed  chan struct{} // closed, and replaced, at every entry and when the last stream ends
	attached map[chan chunk]bool
}

// chunk is output as it came, for an attached client.
type chunk struct {
	stream string
	data   []byte
}

// newOutput creates the log file of output that comes in streams streams.
func newOutput(path string, streams int) (*output, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &output{path: path, file: f, streams: streams, changed: make(chan struct{}), attached: map[chan chunk]bool{}}, nil
}

// copy reads one stream of the command until it ends, and writes it to the log line by line.
// A terminal's end (EIO once its last holder has closed it) ends it as EOF does.
func (o *output) copy(stream string, r io.ReadCloser) {
	defer r.Close()
	buf := make([]byte, 32*1024)
	var line []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			o.publish(stream, buf[:n])
			data := buf[:n]
			for len(data) > 0 {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					line = append(line, data...)
					break
				}
				line = append(line, data[:i]...)
				for len(line) > maxLogLine {
					o.write(stream, 'P', line[:maxLogLine])
					line = line[maxLogLine:]
				}
				o.write(stream, 'F', line)
				line, data = line[:0], data[i+1:]
			}
			for len(line) >= maxLogLine {
				o.write(stream, 'P', line[:maxLogLine])
				line = append(line[:0], line[maxLogLine:]...)
			}
		}
		if err != nil {
			if len(line) > 0 {
				o.write(stream, 'P', line)
			}
			break
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streams--; o.streams == 0 {
		_ = o.file.Close()
		for ch := range o.attached {
			close(ch)
		}
		o.attached = nil
	}
	o.notify()
}

// write appends one entry, in one write, and wakes the readers.
func (o *output) write(stream string, tag byte, text []byte) {
	entry := make([]byte, 0, len(logTime)+len(stream)+len(text)+5)
	entry = time.Now().UTC().AppendFormat(entry, logTime)
	entry = append(append(append(entry, ' '), stream...), ' ', tag, ' ')
	entry = append(append(entry, text...), '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.file.Write(entry)
	o.notify()
}

func (o *output) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// publish gives output to the attached clients. One that does not keep up misses output
// rather than holding up the container (the log has all of it).
func (o *output) publish(stream string, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ch := range o.attached {
		select {
		case ch <- chunk{stream: stream, data: bytes.Clone(data)}:
		default:
		}
	}
}

// attach returns the output from now on; the channel closes when the output ends. detach
// ends it earlier.
func (o *output) attach() (ch <-chan chunk, detach func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := make(chan chunk, 1024)
	if o.attached == nil { // ended
		close(c)
		return c, func() {}
	}
	o.attached[c] = true
	return c, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.attached[c] {
			delete(o.attached, c)
			close(c)
		}
	}
}

// state is the channel the next change closes, and whether the output has ended.
func (o *output) state() (<-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed, o.streams == 0 && o.attached == nil
}

// logOptions are what a reader asks of a log (kubectl logs's options).
type logOptions struct {
	follow, timestamps bool
	tailLines          *int64 // the last N lines only
	limitBytes         *int64 // stop after N bytes
	since              time.Time
	stdout, stderr     bool
}

// logEntry is one parsed entry.
type logEntry struct {
	time    time.Time
	stream  string
	partial bool
	text    []byte
}

func parseLogEntry(line []byte) (logEntry, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	fields := bytes.SplitN(line, []byte(" "), 4)
	if len(fields) < 3 {
		return logEntry{}, fmt.Errorf("log entry %q: want <time> <stream> <tag> <text>", line)
	}
	t, err := time.Parse(time.RFC3339Nano, string(fields[0]))
	if err != nil {
		return logEntry{}, fmt.Errorf("log entry %q: %v", line, err)
	}
	e := logEntry{time: t, stream: string(fields[1]), partial: string(fields[2]) == "P"}
	if len(fields) == 4 {
		e.text = fields[3]
	}
	return e, nil
}

// errLogLimit ends a read at limitBytes.
var errLogLimit = errors.New("the log's byte limit is reached")

// logWriter writes entries as kubectl shows them: the text, a line end for F, the time first
// with timestamps (once per line), and no more than limitBytes.
type logWriter struct {
	w         io.Writer
	opts      logOptions
	remain    int64
	midLine   map[string]bool // a stream's last entry was a part
	wroteSome bool
}

func (lw *logWriter) write(e logEntry) error {
	if e.time.Before(lw.opts.since) || (e.stream == "stdout" && !lw.opts.stdout) || (e.stream == "stderr" && !lw.opts.stderr) {
		return nil
	}
	var b []byte
	if lw.opts.timestamps && !lw.midLine[e.stream] {
		b = append(e.time.AppendFormat(b, logTime), ' ')
	}
	b = append(b, e.text...)
	if !e.partial {
		b = append(b, '\n')
	}
	lw.midLine[e.stream] = e.partial
	if lw.opts.limitBytes != nil && int64(len(b)) >= lw.remain {
		_, err := lw.w.Write(b[:lw.remain])
		return errors.Join(errLogLimit, err)
	}
	lw.remain -= int64(len(b))
	lw.wroteSome = true
	_, err := lw.w.Write(b)
	return err
}

// read writes the log to w as opts ask; following, it ends when the output ends (the
// container has ended and all it wrote is read) or ctx does. flush, when not nil, runs
// whenever the reader waits for more.
func (o *output) read(ctx context.Context, opts logOptions, w io.Writer, flush func()) error {
	f, err := os.Open(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	lw := &logWriter{w: w, opts: opts, midLine: map[string]bool{}}
	if opts.limitBytes != nil {
		lw.remain = *opts.limitBytes
	}
	r := bufio.NewReaderSize(f, 64*1024)
	changed, ended := o.state()

	// What is there now: all of it, or its last lines.
	var tail []logEntry
	var pending []byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // at the end: an entry being written is read later
			pending = line
			break
		}
		e, perr := parseLogEntry(line)
		if perr != nil {
			return perr
		}
		if opts.tailLines == nil {
			if err := lw.write(e); err != nil {
				return ignoreLimit(err)
			}
			continue
		}
		if tail = append(tail, e); int64(len(tail)) > *opts.tailLines {
			tail = tail[1:]
		}
	}
	for _, e := range tail {
		if err := lw.write(e); err != nil {
			return ignoreLimit(err)
		}
	}
	if !opts.follow {
		return nil
	}
	// Then what comes, until the output has ended and is read.
	for {
		if flush != nil {
			flush()
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		changed, ended = o.state()
		for {
			line, err := r.ReadBytes('\n')
			pending = append(pending, line...)
			if err != nil {
				break
			}
			e, perr := parseLogEntry(pending)
			if perr != nil {
				return perr
			}
			pending = pending[:0]
			if err := lw.write(e); err != nil {
				return ignoreLimit(err)
			}
		}
	}
}

func ignoreLimit(err error) error {
	if errors.Is(err, errLogLimit) {
		return nil
	}
	return err
}

// ReadLog is the output of a container as it was written, from the log file at path (see
// LogPath): what `kubectl logs` shows.
func ReadLog(path string) (string, error) {
	var b strings.Builder
	o := &output{path: path}
	err := o.read(context.Background(), logOptions{stdout: true, stderr: true}, &b, nil)
	return b.String(), err
}
