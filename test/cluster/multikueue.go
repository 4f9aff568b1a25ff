package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// MultiKueue across local clusters (docs/queueing.md, "Across clusters with MultiKueue"):
// one cluster, the manager, dispatches jobs to the others, its workers. Each runs Kueue
// (StartKueue, which knows the project's kinds as MultiKueue jobs) and the controller; the
// manager holds, per worker, a Secret with a kubeconfig for it and a MultiKueueCluster, and a
// MultiKueueConfig of them all behind an AdmissionCheck. A ClusterQueue that lists the check
// sends its jobs to the workers.

// InlineKubeconfig is the cluster's admin kubeconfig with the certificate authority inline,
// as MultiKueue accepts one (no file paths).
func (c *Cluster) InlineKubeconfig() ([]byte, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, err
	}
	return clientcmd.Write(*cfg)
}

// ConnectMultiKueue connects the manager to its workers, by name, under the AdmissionCheck
// check (and a MultiKueueConfig of the same name).
func (c *Cluster) ConnectMultiKueue(ctx context.Context, check string, workers map[string]*Cluster) error {
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(workers))
	for name := range workers {
		names = append(names, name)
	}
	sort.Strings(names)
	var manifests []string
	for _, name := range names {
		config, err := workers[name].InlineKubeconfig()
		if err != nil {
			return err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: KueueNamespace},
			Data: map[string][]byte{"kubeconfig": config}}
		if _, err := kube.CoreV1().Secrets(KueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		manifests = append(manifests, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata:
  name: %s
spec:
  clusterSource:
    kubeConfig:
      locationType: Secret
      location: %s-kubeconfig
`, name, name))
	}
	manifests = append(manifests, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata:
  name: %[1]s
spec:
  clusters: [%[2]s]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: %[1]s
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: MultiKueueConfig
    name: %[1]s
`, check, strings.Join(names, ", ")))
	_, err = CreateObjects(ctx, client, strings.Join(manifests, "---\n"))
	return err
}

// MultiKueueQueue is the queue of the local MultiKueue set-up (SetUpMultiKueue): a ClusterQueue
// on the manager behind the AdmissionCheck of the same name, and a LocalQueue of that name in
// namespace default on the manager and on every worker.
const MultiKueueQueue = "multikueue"

// SetUpMultiKueue connects the manager to its workers under MultiKueueQueue, and makes the
// queues: on the manager a ClusterQueue with the AdmissionCheck, quota for what the workers
// offer, and a LocalQueue in namespace default; on each worker a LocalQueue of the same name
// to its default ClusterQueue (the Workload MultiKueue makes there keeps its queue's name).
//
// The manager's ClusterQueue covers pods too: Kueue then counts every pod set's pods, so
// that every admission assigns a flavor. Since v0.17.1 Kueue keeps, once quota is reserved,
// only the admission checks of the flavors assigned: a job whose pods request none of the
// queue's other resources would be admitted on the manager without the MultiKueue check, and
// never dispatched.
func (c *Cluster) SetUpMultiKueue(ctx context.Context, workers map[string]*Cluster) error {
	if err := c.ConnectMultiKueue(ctx, MultiKueueQueue, workers); err != nil {
		return err
	}
	manager, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if _, err := CreateObjects(ctx, manager, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu, pods]
    flavors:
    - name: %[2]s
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 1Ti}
      - {name: nvidia.com/gpu, nominalQuota: "100"}
      - {name: pods, nominalQuota: "10000"}
  admissionChecksStrategy:
    admissionChecks:
    - name: %[1]s
---
%[3]s`, MultiKueueQueue, KueueResourceFlavor, localQueue(KueueLocalQueueNamespace, MultiKueueQueue, MultiKueueQueue))); err != nil {
		return err
	}
	for _, w := range workers {
		client, err := dynamic.NewForConfig(w.Config)
		if err != nil {
			return err
		}
		if _, err := CreateObjects(ctx, client, localQueue(KueueLocalQueueNamespace, MultiKueueQueue, KueueClusterQueue)); err != nil {
			return err
		}
	}
	return nil
}

// localQueue is the manifest of a LocalQueue.
func localQueue(namespace, name, clusterQueue string) string {
	return fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: %s, namespace: %s}\nspec: {clusterQueue: %s}\n", name, namespace, clusterQueue)
}

// WorkerProgress writes a worker cluster's progress lines to stderr, its name first, for
// Options.Progress.
func WorkerProgress(name string) io.Writer { return workerProgress{name} }

type workerProgress struct{ name string }

func (p workerProgress) Write(b []byte) (int, error) {
	fmt.Fprint(os.Stderr, p.name+": "+string(b))
	return len(b), nil
}
