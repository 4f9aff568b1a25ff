package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// The real node's configuration files. Each setting that is not a component's default says
// why; the pitfalls they avoid are in docs/testing.md, "The real node".

// writeRealNodeConfigs writes containerd's, the CNI network's, the kubelet's, kube-proxy's
// and CoreDNS's configuration into the node's state directory.
func writeRealNodeConfigs(p realNodePaths, binDir, clusterDir, kubeconfig string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	kubeletHealth, proxyHealth, proxyMetrics, dnsReady := ports[0], ports[1], ports[2], ports[3]
	files := map[string]string{
		filepath.Join(p.state, "containerd.toml"): fmt.Sprintf(containerdConfig, p.state, p.containerdSocket, pauseImage,
			filepath.Join(binDir, "cni"), p.cniConf),
		filepath.Join(p.cniConf, "10-t9k.conflist"): fmt.Sprintf(cniConfig, realBridge, realPodSubnet, RealNodeIP,
			filepath.Join(p.state, "cni", "ipam")),
		p.kubeletConfig: fmt.Sprintf(kubeletConfig, p.containerdSocket, RealNodeIP, kubeletHealth,
			filepath.Join(p.pki, "kubelet.crt"), filepath.Join(p.pki, "kubelet.key"), filepath.Join(clusterDir, pkiDir, caName+".crt"),
			RealNodeIP, clusterDomain, RealNodeLabel),
		p.proxyConfig: fmt.Sprintf(kubeProxyConfig, kubeconfig, RealNodeName, RealNodeIP, realPodSubnet, proxyHealth, proxyMetrics, realPodSubnet),
		p.corefile:    fmt.Sprintf(corefile, clusterDomain, RealNodeIP, dnsReady, clusterDomain, kubeconfig),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig: state under the node's directory (network namespaces too), the pause
// image imported here, the Debian runc with its state under the node's directory.
// restrict_oom_score_adj: a process here may not lower its oom_score_adj (no
// CAP_SYS_RESOURCE), and runc fails a sandbox that asks to (-998).
const containerdConfig = `version = 3
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]
[grpc]
  address = "%[2]s"
[ttrpc]
  address = "%[2]s.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "%[3]s"
[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "%[1]s/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["%[4]s"]
    conf_dir = "%[5]s"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// cniConfig: the pods on the node's bridge, the node their gateway. No masquerade: nothing
// beyond this machine is reached.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "t9k",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "%s",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "%s", "gateway": "%s"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "%s"
      }
    },
    {"type": "loopback"}
  ]
}
`

// kubeletConfig: cgroup v1 with cgroupfs (failCgroupV1: false), no oom_score_adj of its own
// (no CAP_SYS_RESOURCE), no iptables chains of its own, the cluster's DNS and no host
// resolver (nothing beyond the machine), images never collected (they cannot be pulled
// again), the API server's client certificate trusted by the cluster's CA.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
tlsCertFile: %[4]s
tlsPrivateKeyFile: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[6]s}
authorization: {mode: AlwaysAllow}
rotateCertificates: false
serverTLSBootstrap: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
oomScoreAdj: 0
failSwapOn: false
resolvConf: ""
clusterDNS: [%[7]s]
clusterDomain: %[8]s
registerNode: true
registerWithTaints:
- {key: %[9]s, value: real, effect: NoSchedule}
maxPods: 60
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
serializeImagePulls: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
shutdownGracePeriod: 0s
`

// kubeProxyConfig: iptables mode. masqueradeAll: a pod that reaches a Service whose backend
// is a pod on the same bridge gets the reply through the node, where the address translation
// is undone (the bridge does not pass its frames through iptables here). The conntrack
// settings are left as the machine has them.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, masqueradeAll: true}
nodePortAddresses: ["%s"]
`

// corefile: the cluster's names (Services, their endpoints by hostname, pods by address),
// and their reverse lookups; every other name is refused.
const corefile = `%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[2]s
    ready 127.0.0.1:%[3]d
    errors
    cache 5
    kubernetes %[4]s in-addr.arpa ip6.arpa {
        kubeconfig %[5]s t9k-local
        pods insecure
        ttl 5
    }
}
`
