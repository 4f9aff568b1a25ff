// Command imageprobe is the program of the process node's test images (test/e2e,
// procnode_image_test.go): a static binary, the image's only program, that reports what a
// container of it sees and serves what its probes and Services ask.
//
//	imageprobe serve    serves HTTP on $PORT (8080), then reports: /readyz answers 503 until
//	                    $READY_AFTER has passed since the start, then 200; /healthz answers
//	                    200 until $LIVE_FOR has passed (when set), then 500, and prints the
//	                    X-Probe header it was sent; /whoami answers the host name
//	imageprobe report   reports, then waits to be stopped
//	imageprobe get URL... GETs each URL until it answers 200 (a minute at most), prints
//	                    "get URL: BODY", or "get URL: error ...", then waits to be stopped
//	imageprobe id       prints the user and groups it runs as
//
// The report is one line per check, "check NAME: VALUE", on stdout.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	mode := "report"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "serve":
		serve() // first: its probes may start at once
		report()
		waitForStop()
	case "report":
		report()
		waitForStop()
	case "get":
		for _, u := range os.Args[2:] {
			fmt.Printf("get %s: %s\n", u, get(u))
		}
		waitForStop()
	case "id":
		fmt.Println(id())
	default:
		fmt.Fprintln(os.Stderr, "imageprobe: unknown mode", mode)
		os.Exit(2)
	}
}

// waitForStop returns when the container is stopped (SIGTERM), and exits.
func waitForStop() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	os.Exit(0)
}

func check(name, value string) { fmt.Printf("check %s: %s\n", name, value) }

func id() string {
	groups, _ := syscall.Getgroups()
	return fmt.Sprintf("uid=%d gid=%d groups=%v", os.Getuid(), os.Getgid(), groups)
}

// report prints what the container sees.
func report() {
	check("id", id())
	check("args", strings.Join(os.Args, " "))
	wd, _ := os.Getwd()
	check("cwd", wd)
	for _, v := range []string{"PROBE_IMAGE_ENV", "PROBE_OVERRIDDEN", "T9K_MEMORY_LIMIT", "CPU_LIMIT", "HOME", "PATH", "HOSTNAME",
		"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS", "KUBERNETES_PORT_443_TCP"} {
		check("env "+v, os.Getenv(v))
	}
	if data, err := os.ReadFile("/image-only.txt"); err == nil {
		check("image file", strings.TrimSpace(string(data)))
	} else {
		check("image file", errText(err))
	}
	_, err := os.Stat("/usr/bin/python3")
	check("python3", errText(err))
	// /data is the image's, writable by everyone: a write fails only if the root is read-only.
	check("root write", errText(os.WriteFile("/data/written-by-probe", []byte("x"), 0o644)))
	if dir := os.Getenv("SCRATCH"); dir != "" {
		check("scratch write", errText(os.WriteFile(filepath.Join(dir, "written-by-probe"), []byte("x"), 0o644)))
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		for _, key := range []string{"CapEff", "CapBnd", "CapPrm", "NoNewPrivs"} {
			if v, ok := strings.CutPrefix(line, key+":"); ok {
				check(key, strings.TrimSpace(v))
			}
		}
	}
	check("api", apiCall())
}

// apiCall reads this pod from the API server as in-cluster clients do: the service account's
// token and CA, at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT. It tries for a while
// until it has an answer: its status code, or the last error.
func apiCall() string {
	ns, err := os.ReadFile(filepath.Join(serviceAccount, "namespace"))
	if err != nil {
		return "error " + err.Error()
	}
	ca, err := os.ReadFile(filepath.Join(serviceAccount, "ca.crt"))
	if err != nil {
		return "error " + err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "error: no certificate in ca.crt"
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://%s:%s/api/v1/namespaces/%s/pods/%s", os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"),
		strings.TrimSpace(string(ns)), os.Getenv("HOSTNAME"))
	var last string
	for range 30 {
		token, err := os.ReadFile(filepath.Join(serviceAccount, "token"))
		if err != nil {
			return "error " + err.Error()
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return fmt.Sprint(resp.StatusCode) // an answer: the path there works
		}
		last = "error " + err.Error()
		time.Sleep(time.Second)
	}
	return last
}

func serve() {
	start := time.Now()
	after := func(env string) (time.Duration, bool) {
		d, err := time.ParseDuration(os.Getenv(env))
		return d, err == nil
	}
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if d, ok := after("READY_AFTER"); ok && time.Since(start) < d {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Probe"); v != "" {
			fmt.Printf("healthz: header X-Probe=%s\n", v)
		}
		if d, ok := after("LIVE_FOR"); ok && time.Since(start) > d {
			fmt.Printf("healthz: failing (user agent %s)\n", r.UserAgent())
			http.Error(w, "tired", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) {
		name, _ := os.Hostname()
		fmt.Fprintln(w, name)
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("serving on", port)
	go func() { _ = http.Serve(l, nil) }()
}

// get GETs a URL until it answers 200, for a minute at most.
func get(url string) string {
	client := &http.Client{Timeout: 3 * time.Second}
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			last = "error " + err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return strings.TrimSpace(string(body))
		}
		last = fmt.Sprintf("error status %d", resp.StatusCode)
	}
	return last
}

// errText is "ok", or the error's text without the path (the errno's words).
func errText(err error) string {
	var pe *os.PathError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &pe):
		return pe.Err.Error()
	}
	return err.Error()
}
