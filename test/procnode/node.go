// Package procnode is a small kubelet for tests: it registers a Node and runs the pods bound
// to it as real processes on this machine, each pod in network, mount, UTS and PID
// namespaces of its own, with its volumes, environment and names as a cluster gives them
// (docs/testing.md, "The process node"). It needs root.
//
// Pods land on it only if they select the label node.t9k.dev/runtime=process and tolerate
// its taint of the same key, so the fake (kwok) nodes of the test cluster keep every other
// pod.
//
// Images: a container whose image the node was given as an OCI archive (Options.
// ImageArchives, images.go) runs from that image's root file system, with its entrypoint,
// command, environment, working directory and user combined with the container's as
// Kubernetes defines it (imageconfig.go). Any other image is not pulled: the machine's
// programs stand in for it, so such a container must name its command.
//
// What a kubelet does that this node does too: security contexts (security.go: users and
// groups, runAsNonRoot, capabilities, no_new_privs, a read-only root), probes (probes.go:
// startup, liveness and readiness; exec, tcpSocket and httpGet), volumes (volumes.go,
// projected.go: Secret, ConfigMap, emptyDir, hostPath, PersistentVolumeClaim as a directory,
// projected and downwardAPI, service account tokens renewed), the downward API and
// resourceFieldRef (env.go, resources.go), the Services' variables (svcenv.go), ClusterIP
// Services and their names (services.go, dns.go), and the kubelet API (kubeletapi.go).
//
// What it does not do: pull images; restart containers (restartPolicy is the pod owner's
// business: a container that ends stays ended, and a failed liveness probe stops a container
// for good, probes.go); enforce resources (no cgroups: limits and requests are read, never
// applied; no eviction); seccomp, AppArmor, SELinux, sysctls, procMount, user namespaces
// (hostUsers), hostNetwork, hostPID, hostIPC; sidecar init containers (restartPolicy Always),
// ephemeral containers, lifecycle hooks (postStart, preStop), gRPC probes; volume kinds other
// than those above (CSI, ephemeral volumes, image volumes); fsGroup ownership of Secret,
// ConfigMap and emptyDir volumes; UDP Services, NodePorts, session affinity; a pod's
// resize; metrics and stats (kubectl top); a node's conditions other than Ready.
package procnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// RuntimeLabel marks the process node; pods select it, and tolerate its taint of the same key.
const RuntimeLabel = "node.t9k.dev/runtime"

// RuntimeValue is the label's value.
const RuntimeValue = "process"

// Options configure a node.
type Options struct {
	Kube kubernetes.Interface
	// Name of the Node; "procnode" when empty.
	Name string
	// PodCIDR is the range pod addresses come from; 10.250.0.0/24 when empty.
	PodCIDR string
	// StateDir keeps the pods' volumes and logs: StateDir/pods/<namespace>_<pod>/.
	StateDir string
	// Log receives one line per event; nil discards them.
	Log io.Writer

	// ImageArchives are the images the node runs from their own root file systems (images.go):
	// archives (tars of OCI image layouts), or directories whose *.tar files are archives; a
	// directory is read again when a pod names an image the node does not know, so an archive
	// added to it later (whole: write it beside and rename it in) is found.
	ImageArchives []string
	// ServiceCIDR is the cluster's Service range (kube-apiserver's
	// --service-cluster-ip-range); 10.96.0.0/16 when empty.
	ServiceCIDR string
	// APIServerAddress (host:port) is where the kubernetes Service of the default namespace
	// takes pods (services.go): the API server the node talks to. Empty: to its endpoints,
	// as any Service.
	APIServerAddress string

	// The kubelet API (kubeletapi.go), served on 127.0.0.1:Port (0: a free port) only when
	// ClientCAFile is set: only clients with a certificate of that CA are served (the API
	// server's kubelet client certificate). TLSCertFile and TLSKeyFile are the serving
	// certificate; without them the node makes a self-signed one.
	Port                                  int
	TLSCertFile, TLSKeyFile, ClientCAFile string
}

// Node is a running process node.
type Node struct {
	opts     Options
	net      *network
	services listers.ServiceLister
	images   *imageStore
	proxy    *serviceProxy
	log      func(format string, args ...any)
	port     int // the kubelet API's; 0 when it is not served

	mu   sync.Mutex
	pods map[string]*podRunner // by namespace/name
}

// LogPath is where the output of a container of a pod is kept.
func LogPath(stateDir, namespace, pod, container string) string {
	return filepath.Join(stateDir, "pods", namespace+"_"+pod, "logs", container+".log")
}

// Run registers the node and runs its pods until ctx ends; then it stops every pod, removes
// its network and deletes the Node.
func Run(ctx context.Context, opts Options) error {
	if os.Geteuid() != 0 {
		return errors.New("the process node needs root (network and mount namespaces)")
	}
	if opts.Name == "" {
		opts.Name = "procnode"
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = "10.250.0.0/24"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return err
	}
	network, err := newNetwork(opts.PodCIDR, opts.ServiceCIDR)
	if err != nil {
		return err
	}
	defer network.close()
	n := &Node{opts: opts, net: network, pods: map[string]*podRunner{},
		log: func(format string, args ...any) {
			fmt.Fprintf(opts.Log, "procnode %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}}
	n.images = newImageStore(opts.ImageArchives, opts.StateDir, n.log)
	if err := n.images.load(); err != nil {
		return err
	}

	var dns net.PacketConn
	if err := network.inNamespace(func() (err error) {
		dns, err = net.ListenPacket("udp", net.JoinHostPort(network.gateway.String(), "53"))
		return err
	}); err != nil {
		return fmt.Errorf("DNS server: %w", err)
	}
	defer dns.Close()
	go serveDNS(dns, n.resolve)

	if opts.ClientCAFile != "" {
		l, config, err := listenAPI(opts)
		if err != nil {
			return err
		}
		n.port = l.Addr().(*net.TCPAddr).Port
		go n.serveAPI(ctx, l, config)
		n.log("kubelet API on https://127.0.0.1:%d", n.port)
	} else {
		n.log("kubelet API not served: no client CA (kubectl logs, exec, attach and port-forward will not reach this node)")
	}

	if err := n.register(ctx); err != nil {
		return fmt.Errorf("registering the Node: %w", err)
	}
	defer n.unregister()
	go n.heartbeat(ctx)

	all := informers.NewSharedInformerFactory(opts.Kube, 0)
	n.services = all.Core().V1().Services().Lister()
	n.proxy = &serviceProxy{n: n, slices: all.Discovery().V1().EndpointSlices().Lister(), listeners: map[string]*serviceListener{}}
	defer n.proxy.close()
	_, _ = all.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.proxy.sync() },
		UpdateFunc: func(_, _ any) { n.proxy.sync() },
		DeleteFunc: func(any) { n.proxy.sync() },
	})
	mine := informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.Name).String()
	}))
	_, _ = mine.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				n.podGone(p)
			}
		},
	})
	all.Start(ctx.Done())
	// Pods start once the Services are known: their variables are in every container's
	// environment.
	all.WaitForCacheSync(ctx.Done())
	mine.Start(ctx.Done())
	n.log("node %s ready, pods in %s", opts.Name, network.prefix)
	<-ctx.Done()
	all.Shutdown()
	mine.Shutdown()
	n.stopAll()
	return nil
}

// podChanged starts a runner for a new pod, and passes a deletion on to its runner.
func (n *Node) podChanged(ctx context.Context, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	r, ok := n.pods[key]
	if ok && r.uid != pod.UID {
		ok = false // an earlier pod of the same name: its runner ends by itself
	}
	if !ok {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			n.mu.Unlock()
			if pod.DeletionTimestamp != nil {
				n.remove(pod) // not ours to run (any more): let it go
			}
			return
		}
		r = newPodRunner(n, pod)
		n.pods[key] = r
		go r.run(ctx)
	}
	n.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		r.delete(time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second)
	}
}

func (n *Node) podGone(pod *corev1.Pod) {
	n.mu.Lock()
	r, ok := n.pods[pod.Namespace+"/"+pod.Name]
	n.mu.Unlock()
	if ok && r.uid == pod.UID {
		r.delete(0)
	}
}

// forget drops a runner that has finished.
func (n *Node) forget(r *podRunner) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pods[r.key] == r {
		delete(n.pods, r.key)
	}
}

// remove deletes a pod object whose processes are gone, as a kubelet does once it has
// stopped a pod: at once, and only that pod (by UID).
func (n *Node) remove(pod *corev1.Pod) {
	uid := pod.UID
	err := n.opts.Kube.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		n.log("deleting pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// stopAll stops every pod, at once.
func (n *Node) stopAll() {
	n.mu.Lock()
	runners := make([]*podRunner, 0, len(n.pods))
	for _, r := range n.pods {
		runners = append(runners, r)
	}
	n.mu.Unlock()
	for _, r := range runners {
		r.delete(0)
	}
	for _, r := range runners {
		<-r.done
	}
}

// resolve answers the cluster names: <svc>.<ns>.svc... (a Service's cluster IP, or the pods of
// this node a headless Service selects) and <hostname>.<subdomain>.<ns>.svc... (a pod).
func (n *Node) resolve(name string) ([]netip.Addr, bool) {
	parts := splitClusterName(name)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch len(parts) {
	case 2: // <svc>.<ns>
		svc, err := n.services.Services(parts[1]).Get(parts[0])
		if err != nil {
			return nil, false
		}
		if hasClusterIP(svc) {
			if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
				return []netip.Addr{ip}, true
			}
		}
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		var addrs []netip.Addr
		for _, r := range n.pods {
			ip, ready, ok := r.address()
			if ok && r.namespace == parts[1] && len(svc.Spec.Selector) > 0 && selector.Matches(labels.Set(r.labels)) &&
				(ready || svc.Spec.PublishNotReadyAddresses) {
				addrs = append(addrs, ip)
			}
		}
		return addrs, true
	case 3: // <hostname>.<subdomain>.<ns>
		for _, r := range n.pods {
			if r.namespace == parts[2] && r.hostname == parts[0] && r.subdomain == parts[1] {
				if ip, _, ok := r.address(); ok {
					return []netip.Addr{ip}, true
				}
			}
		}
	}
	return nil, false
}

// register creates (or takes over) the Node: Ready, labelled, tainted so that only pods that
// ask for it land here.
func (n *Node) register(ctx context.Context) error {
	nodes := n.opts.Kube.CoreV1().Nodes()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Labels: map[string]string{
			RuntimeLabel: RuntimeValue, corev1.LabelHostname: n.opts.Name, corev1.LabelOSStable: "linux"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: RuntimeLabel, Value: RuntimeValue, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := nodes.Delete(ctx, n.opts.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	return n.writeNodeStatus(ctx)
}

// writeNodeStatus reports the node Ready, retrying on conflicts with the node controllers.
func (n *Node) writeNodeStatus(ctx context.Context) error {
	nodes := n.opts.Kube.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.opts.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status = n.nodeStatus()
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func (n *Node) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.opts.Kube.CoreV1().Nodes().Delete(ctx, n.opts.Name, metav1.DeleteOptions{})
}

func (n *Node) nodeStatus() corev1.NodeStatus {
	now := metav1.Now()
	capacity := nodeCapacity.DeepCopy()
	var images []corev1.ContainerImage
	for _, img := range n.images.names() {
		images = append(images, corev1.ContainerImage{Names: img.names, SizeBytes: img.size})
	}
	return corev1.NodeStatus{
		Images:   images,
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the process node runs pods", LastHeartbeatTime: now, LastTransitionTime: now}},
		// The API server reaches the kubelet API at the InternalIP, on this machine's loopback.
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.opts.Name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.port)}},
		NodeInfo:        corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.1-procnode", ContainerRuntimeVersion: "procnode://1"},
	}
}

// heartbeat keeps the node Ready: its status and its Lease, every 10 seconds.
func (n *Node) heartbeat(ctx context.Context) {
	leases := n.opts.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for {
		if err := n.writeNodeStatus(ctx); err != nil && ctx.Err() == nil {
			n.log("node status: %v", err)
		}
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, n.opts.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.opts.Name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.RenewTime = &now
			_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// serviceEnv are the Services' variables for a pod's containers (svcenv.go).
func (n *Node) serviceEnv(pod *corev1.Pod) []string {
	services, err := n.services.List(labels.Everything())
	if err != nil {
		return nil
	}
	return serviceEnv(services, pod)
}
