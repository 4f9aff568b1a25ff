package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The default set-up StartKueue creates: one flavor with no node labels, one ClusterQueue
// open to every namespace whose quota is what the fake nodes offer, and one LocalQueue in
// namespace default. A job queued with the label kueue.x-k8s.io/queue-name: default (in
// namespace default) is admitted while that quota lasts.
const (
	KueueNamespace           = "kueue-system"
	KueueResourceFlavor      = "default-flavor"
	KueueClusterQueue        = "cluster-queue"
	KueueLocalQueue          = "default"
	KueueLocalQueueNamespace = "default"
)

// kueueFrameworks are the project's kinds in Kueue's Kind.version.group form: Kueue treats
// them as jobs an external controller integrates (it owns their Workloads).
var kueueFrameworks = []string{
	"GenericJob.v1beta1.batch.tensorstack.dev",
	"MPIJob.v1beta1.batch.tensorstack.dev",
	"ColossalAIJob.v1beta1.batch.tensorstack.dev",
	"TensorFlowTrainingJob.v1beta1.batch.tensorstack.dev",
	"XGBoostTrainingJob.v1beta1.batch.tensorstack.dev",
}

const kueueGroup = "kueue.x-k8s.io"

// kueueWebhookGroups are the API groups whose Kueue webhooks are registered: Kueue's own and
// batch (Jobs, the one built-in integration enabled). Pods, Deployments, StatefulSets and the
// other frameworks are left alone.
var kueueWebhookGroups = []string{kueueGroup, "batch"}

// Kueue's internal certificate management, by its default names. It is enabled because
// without it Kueue reads its metrics certificate from a fixed path, /etc/kueue/metrics/certs,
// outside the cluster's directory. The Secret is made here, holding a CA named kueue-ca and a
// serving certificate for both the Service's name (which the management checks) and
// 127.0.0.1 (where the API server calls): finding them valid, Kueue keeps them.
const (
	kueueWebhookService = "kueue-webhook-service"
	kueueWebhookSecret  = "kueue-webhook-server-cert"
	kueueCAName         = "kueue-ca"
	// kueueConfigPrefix names the webhook configurations as Kueue's kustomization does, the
	// names its certificate management updates.
	kueueConfigPrefix = "kueue-"
)

var (
	resourceFlavorsGVR = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "resourceflavors"}
	clusterQueuesGVR   = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "clusterqueues"}
)

// KueueOptions configure StartKueue.
type KueueOptions struct {
	// PodsReadyTimeout is Kueue's waitForPodsReady timeout: an admitted job whose pods are
	// not all ready by then is evicted (5m when zero).
	PodsReadyTimeout time.Duration
	// WorkerLostTimeout is MultiKueue's: a job whose worker cluster cannot be reached for
	// that long is queued again (15m when zero, Kueue's default).
	WorkerLostTimeout time.Duration
}

// kueueSetup is what StartKueue's steps share.
type kueueSetup struct {
	dir, configDir          string // <cluster>/kueue; <bin>/kueue-config
	webhookPort, healthPort int
	caPEM                   []byte
	kube                    kubernetes.Interface
	dynamic                 dynamic.Interface
}

// url is the webhook server's address for path.
func (k *kueueSetup) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", k.webhookPort, path)
}

// StartKueue installs Kueue's CRDs and webhooks on the running cluster, starts Kueue as one of
// its processes (Stop ends it), waits until its webhooks answer, and creates the default
// set-up (KueueClusterQueue and the rest). Kueue manages batch Jobs and the project's kinds
// that name a queue, and nothing else: no pods, Deployments or StatefulSets.
func (c *Cluster) StartKueue(ctx context.Context, opts KueueOptions) (err error) {
	for _, p := range c.procs {
		if exited, _ := p.Exited(); p.name == "kueue" && !exited {
			return errors.New("kueue is already running")
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("kueue: %w (its log: %s)", err, filepath.Join(c.Dir, "logs", "kueue.log"))
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	k := &kueueSetup{dir: filepath.Join(c.Dir, "kueue"), configDir: filepath.Join(c.opts.BinDir, "kueue-config"),
		webhookPort: ports[0], healthPort: ports[2]}
	if k.kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	// Quiet: the v1beta1 read that proves the conversion webhook draws a deprecation warning.
	quiet := rest.CopyConfig(c.Config)
	quiet.WarningHandler = rest.NoWarnings{}
	if k.dynamic, err = dynamic.NewForConfig(quiet); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Left registered, webhooks that fail closed would refuse every batch Job.
			c.stopKueue(k)
		}
	}()

	c.step("installing kueue's CRDs and webhooks (server https://127.0.0.1:%d)", k.webhookPort)
	if err := k.writePKI(); err != nil {
		return err
	}
	if err := k.createNamespaceAndSecret(ctx); err != nil {
		return err
	}
	if err := k.installCRDs(ctx, c); err != nil {
		return err
	}
	if err := k.registerWebhooks(ctx); err != nil {
		return err
	}
	if opts.PodsReadyTimeout == 0 {
		opts.PodsReadyTimeout = 5 * time.Minute
	}
	if opts.WorkerLostTimeout == 0 {
		opts.WorkerLostTimeout = 15 * time.Minute
	}
	config, err := k.writeConfig(ports[1], opts.PodsReadyTimeout, opts.WorkerLostTimeout)
	if err != nil {
		return err
	}

	c.step("starting kueue")
	args := []string{"--config=" + config, "--kubeconfig=" + c.Kubeconfig}
	if level := os.Getenv("T9K_KUEUE_LOG_LEVEL"); level != "" {
		args = append(args, "--zap-log-level="+level)
	}
	if err := c.run("kueue", filepath.Join(c.opts.BinDir, "kueue"), args...); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kueue's webhooks", 90*time.Second, k.webhooksAnswer); err != nil {
		return err
	}

	c.step("creating kueue's default queues: ClusterQueue %s, LocalQueue %s/%s", KueueClusterQueue, KueueLocalQueueNamespace, KueueLocalQueue)
	if err := k.createQueues(ctx); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the ClusterQueue to be active", 60*time.Second, k.queueActive); err != nil {
		return err
	}
	c.step("kueue ready; metrics on https://127.0.0.1:%d/metrics", ports[1])
	return nil
}

// stopKueue ends a Kueue that failed to start and unregisters its webhooks. Its process is
// forgotten, or every later waitFor would report that it exited.
func (c *Cluster) stopKueue(k *kueueSetup) {
	c.procs = slices.DeleteFunc(c.procs, func(p *process) bool {
		if p.name == "kueue" {
			_ = p.stop()
			return true
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admission := k.kube.AdmissionregistrationV1()
	_ = admission.MutatingWebhookConfigurations().Delete(ctx, kueueConfigPrefix+"mutating-webhook-configuration", metav1.DeleteOptions{})
	_ = admission.ValidatingWebhookConfigurations().Delete(ctx, kueueConfigPrefix+"validating-webhook-configuration", metav1.DeleteOptions{})
}

// writePKI makes Kueue's CA and its serving certificate: the CA in <cluster>/pki, the
// certificate as tls.crt and tls.key in <cluster>/kueue/certs, where its webhook server reads
// them.
func (k *kueueSetup) writePKI() error {
	certDir := filepath.Join(k.dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	pki := filepath.Join(filepath.Dir(k.dir), pkiDir)
	now := time.Now()
	// Kueue's certificate management reads the CA's key as PKCS #1 RSA only, and checks that
	// the CA carries its name as a DNS name.
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	caCert, err := issue(pki, kueueCAName, &x509.Certificate{
		Subject: pkix.Name{CommonName: kueueCAName}, DNSNames: []string{kueueCAName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}, caKey, nil, nil)
	if err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	service := kueueWebhookService + "." + KueueNamespace + ".svc"
	if _, err := issue(certDir, "tls", &x509.Certificate{
		Subject: pkix.Name{CommonName: service}, DNSNames: []string{service},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key, caCert, caKey); err != nil {
		return err
	}
	k.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	return nil
}

// createNamespaceAndSecret creates kueue-system and, in it, the Secret Kueue's certificate
// management keeps its CA and certificate in: ours.
func (k *kueueSetup) createNamespaceAndSecret(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if _, err := k.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	data := map[string][]byte{"ca.crt": k.caPEM}
	for name, path := range map[string]string{
		"ca.key":  filepath.Join(filepath.Dir(k.dir), pkiDir, kueueCAName+".key"),
		"tls.crt": filepath.Join(k.dir, "certs", "tls.crt"),
		"tls.key": filepath.Join(k.dir, "certs", "tls.key"),
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data[name] = b
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kueueWebhookSecret, Namespace: KueueNamespace}, Data: data}
	return createOrUpdate(ctx, k.kube.CoreV1().Secrets(KueueNamespace), secret)
}

// installCRDs installs Kueue's CRDs, those that convert between versions through Kueue's
// webhook pointed at it, and waits until the API server serves them.
func (k *kueueSetup) installCRDs(ctx context.Context, c *Cluster) error {
	converted, err := k.convertedCRDs()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(k.configDir, "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (run hack/lib/tools.sh): %v", k.configDir, err)
	}
	var names []string
	for _, file := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readYAML(file, crd); err != nil {
			return err
		}
		if reviewVersions, ok := converted[crd.Name]; ok {
			url := k.url("/convert")
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: k.caPEM},
					ConversionReviewVersions: reviewVersions,
				},
			}
		}
		if err := createOrUpdate(ctx, client.ApiextensionsV1().CustomResourceDefinitions(), crd); err != nil {
			return err
		}
		names = append(names, crd.Name)
	}
	return WaitEstablished(ctx, client, names, 60*time.Second)
}

// convertedCRDs reads which CRDs Kueue's kustomization gives a conversion webhook (the
// patches it lists), with their ConversionReviewVersions, by CRD name.
func (k *kueueSetup) convertedCRDs() (map[string][]string, error) {
	var kustomization struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := readYAML(filepath.Join(k.configDir, "crd", "kustomization.yaml"), &kustomization); err != nil {
		return nil, err
	}
	converted := map[string][]string{}
	for _, patch := range kustomization.Patches {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readYAML(filepath.Join(k.configDir, "crd", patch.Path), crd); err != nil {
			return nil, err
		}
		if conv := crd.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter && conv.Webhook != nil {
			converted[crd.Name] = conv.Webhook.ConversionReviewVersions
		}
	}
	if len(converted) == 0 {
		return nil, fmt.Errorf("no conversion webhook patches in %s", filepath.Join(k.configDir, "crd", "kustomization.yaml"))
	}
	return converted, nil
}

// registerWebhooks registers Kueue's webhook configurations (kueueWebhooks).
func (k *kueueSetup) registerWebhooks(ctx context.Context) error {
	mutating, validating, err := k.webhooks()
	if err != nil {
		return err
	}
	admission := k.kube.AdmissionregistrationV1()
	if err := createOrUpdate(ctx, admission.MutatingWebhookConfigurations(), mutating); err != nil {
		return err
	}
	return createOrUpdate(ctx, admission.ValidatingWebhookConfigurations(), validating)
}

// webhooks reads Kueue's mutating and validating webhook configurations and keeps the
// webhooks for kueueWebhookGroups, each called at its path on Kueue's server, trusting
// Kueue's CA.
func (k *kueueSetup) webhooks() (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration, error) {
	path := filepath.Join(k.configDir, "webhook", "manifests.yaml")
	docs, err := readYAMLDocuments(path)
	if err != nil {
		return nil, nil, err
	}
	var mutating *admissionv1.MutatingWebhookConfiguration
	var validating *admissionv1.ValidatingWebhookConfiguration
	var ok bool
	for _, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			mutating = &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, mutating); err != nil {
				return nil, nil, err
			}
			mutating.Name = kueueConfigPrefix + mutating.Name
			kept := mutating.Webhooks[:0]
			for _, w := range mutating.Webhooks {
				if w.ClientConfig, ok = k.clientConfig(w.Rules, w.ClientConfig); ok {
					kept = append(kept, w)
				}
			}
			mutating.Webhooks = kept
		case "ValidatingWebhookConfiguration":
			validating = &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, validating); err != nil {
				return nil, nil, err
			}
			validating.Name = kueueConfigPrefix + validating.Name
			kept := validating.Webhooks[:0]
			for _, w := range validating.Webhooks {
				if w.ClientConfig, ok = k.clientConfig(w.Rules, w.ClientConfig); ok {
					kept = append(kept, w)
				}
			}
			validating.Webhooks = kept
		}
	}
	if mutating == nil || validating == nil {
		return nil, nil, fmt.Errorf("%s lacks a mutating or a validating webhook configuration", path)
	}
	return mutating, validating, nil
}

// clientConfig reports whether a webhook is to be registered, its rules being all for
// kueueWebhookGroups, and returns its client configuration pointed at Kueue's server.
func (k *kueueSetup) clientConfig(rules []admissionv1.RuleWithOperations, config admissionv1.WebhookClientConfig) (admissionv1.WebhookClientConfig, bool) {
	for _, rule := range rules {
		for _, group := range rule.APIGroups {
			if !slices.Contains(kueueWebhookGroups, group) {
				return config, false
			}
		}
	}
	if config.Service == nil || config.Service.Path == nil {
		return config, false
	}
	url := k.url(*config.Service.Path)
	return admissionv1.WebhookClientConfig{URL: &url, CABundle: k.caPEM}, true
}

// writeConfig writes Kueue's Configuration and returns its path. The webhook server, the
// metrics server and the health probes listen on loopback, on free ports. Waiting for pods
// to be ready evicts a workload whose pods are not all ready 5 minutes after admission, and
// does not hold back other admissions meanwhile. MultiKueue knows the project's kinds: a
// cluster connected to workers (ConnectMultiKueue) dispatches them. VisibilityOnDemand is
// off: it serves an aggregated API that would need an APIService and a fixed port.
func (k *kueueSetup) writeConfig(metricsPort int, podsReadyTimeout, workerLostTimeout time.Duration) (string, error) {
	path := filepath.Join(k.dir, "config.yaml")
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
metrics:
  bindAddress: 127.0.0.1:%d
health:
  healthProbeBindAddress: 127.0.0.1:%d
internalCertManagement:
  enable: true
  webhookServiceName: %s
  webhookSecretName: %s
clientConnection:
  qps: 200
  burst: 400
manageJobsWithoutQueueName: false
waitForPodsReady:
  timeout: %s
  blockAdmission: false
integrations:
  frameworks:
  - batch/job
  externalFrameworks:
  - %[9]s
multiKueue:
  gcInterval: 30s
  workerLostTimeout: %[10]s
  externalFrameworks:
  - name: %[11]s
featureGates:
  VisibilityOnDemand: false
`, KueueNamespace, k.webhookPort, filepath.Join(k.dir, "certs"), metricsPort, k.healthPort,
		kueueWebhookService, kueueWebhookSecret, podsReadyTimeout, strings.Join(kueueFrameworks, "\n  - "),
		workerLostTimeout, strings.Join(kueueFrameworks, "\n  - name: "))
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// webhooksAnswer checks that Kueue is ready and that its webhooks answer: a dry-run
// ResourceFlavor passes both the mutating and the validating one.
func (k *kueueSetup) webhooksAnswer(ctx context.Context) error {
	// Kueue serves its probes first from a manager that only sets up certificates, then
	// from its real one: a request caught in between would wait for the whole timeout.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", k.healthPort)); err != nil {
		return err
	}
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": resourceFlavorsGVR.GroupVersion().String(), "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "webhook-probe"},
	}}
	_, err := k.dynamic.Resource(resourceFlavorsGVR).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// createQueues creates the default flavor, ClusterQueue and LocalQueue. The ClusterQueue's
// nominal quota is the sum of what the fake nodes offer.
func (k *kueueSetup) createQueues(ctx context.Context) error {
	quota, err := fakeNodeCapacity(ctx, k.kube)
	if err != nil {
		return err
	}
	manifests := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[2]s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: %[1]s
      resources:
      - {name: cpu, nominalQuota: %[5]q}
      - {name: memory, nominalQuota: %[6]q}
      - {name: nvidia.com/gpu, nominalQuota: %[7]q}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: %[3]s
  namespace: %[4]s
spec:
  clusterQueue: %[2]s
`, KueueResourceFlavor, KueueClusterQueue, KueueLocalQueue, KueueLocalQueueNamespace,
		quota.Cpu(), quota.Memory(), quota.Name("nvidia.com/gpu", resource.DecimalSI))
	_, err = CreateObjects(ctx, k.dynamic, manifests)
	return err
}

// ConditionTrue reports whether an object's status has the condition, True (Kueue's
// objects: ClusterQueues, AdmissionChecks, Workloads ...).
func ConditionTrue(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	return slices.ContainsFunc(conditions, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == conditionType && m["status"] == "True"
	})
}

// queueActive checks that Kueue reports the default ClusterQueue active, and that it can be
// read as v1beta1 too, through the conversion webhook.
func (k *kueueSetup) queueActive(ctx context.Context) error {
	cq, err := k.dynamic.Resource(clusterQueuesGVR).Get(ctx, KueueClusterQueue, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !ConditionTrue(cq, "Active") {
		conditions, _, _ := unstructured.NestedSlice(cq.Object, "status", "conditions")
		return fmt.Errorf("ClusterQueue %s is not active: %v", KueueClusterQueue, conditions)
	}
	v1beta1 := clusterQueuesGVR
	v1beta1.Version = "v1beta1"
	_, err = k.dynamic.Resource(v1beta1).Get(ctx, KueueClusterQueue, metav1.GetOptions{})
	return err
}

// fakeNodeCapacity sums the allocatable resources of the fake nodes.
func fakeNodeCapacity(ctx context.Context, client kubernetes.Interface) (corev1.ResourceList, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	total := corev1.ResourceList{}
	for _, node := range nodes.Items {
		if _, fake := node.Annotations[FakeNodeAnnotation]; !fake {
			continue
		}
		for name, q := range node.Status.Allocatable {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	if total.Cpu().IsZero() {
		return nil, errors.New("no fake node reports allocatable resources")
	}
	return total, nil
}
