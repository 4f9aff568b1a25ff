package engine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/decision/decisiontest"
	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// progressController is a controller of one GenericJob of two workers, with the progress
// endpoint at https://ctl.example:10443 whose CA is *ca, driven by hand.
func progressController(t *testing.T, ca *string, tmpl func(int32) corev1.PodTemplateSpec) (*Controller, *kubefake.Clientset) {
	t.Helper()
	job := decisiontest.Job(batch.JobStatus{})
	jobs := fake.NewClientset(job)
	informer := jobinformers.NewSharedInformerFactory(jobs, 0).Batch().V1beta1().GenericJobs()
	if err := informer.Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	adapter := NewAdapter[*batch.GenericJob]("GenericJob", informer.Informer(), informer.Lister().GenericJobs, jobs.BatchV1beta1().GenericJobs,
		func(*batch.GenericJob) (*Plan, error) {
			g := workers(2, batch.RestartNever, nil)
			if tmpl != nil {
				g.Template = tmpl
			}
			return &Plan{Groups: []Group{g}, Judge: whenAllSucceed}, nil
		})
	kube := kubefake.NewClientset()
	c := New(adapter, Clients{Kube: kube}, Informers{Kube: informers.NewSharedInformerFactory(kube, 0)}, record.NewFakeRecorder(100),
		Options{Progress: &ProgressEndpoint{URL: "https://ctl.example:10443/", CA: func() []byte { return []byte(*ca) }}})
	st := NewStepper(c, clocktesting.NewFakeClock(now))
	t.Cleanup(st.Queue().ShutDown)
	return c, kube
}

func createdOf[T any](kube *kubefake.Clientset, resource string) []T {
	var out []T
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == resource {
			out = append(out, a.(k8stesting.CreateAction).GetObject().(T))
		}
	}
	return out
}

// TestProgressInjected: with the progress endpoint, a job gets the ConfigMap of the
// endpoint's CA, made before its pods, and every container and init container of its pods
// Kubeflow Trainer's variables and the directory of the token (for the job's audience, which
// pkg/progress checks, at the path it serves) and the CA.
func TestProgressInjected(t *testing.T) {
	ca := "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
	c, kube := progressController(t, &ca, nil)
	if _, err := c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" {
			order = append(order, a.GetResource().Resource)
		}
	}
	if len(order) != 3 || order[0] != "configmaps" {
		t.Fatalf("created %v, want the ConfigMap, then the pods", order)
	}
	cm := createdOf[*corev1.ConfigMap](kube, "configmaps")[0]
	if cm.Name != "job-progress-ca" || cm.Data["ca.crt"] != ca || metav1.GetControllerOf(cm) == nil || metav1.GetControllerOf(cm).UID != "job-uid" ||
		cm.Labels[batch.LabelJobName] != "job" {
		t.Errorf("the CA's ConfigMap: %+v", cm)
	}
	job := progress.JobRef{Resource: "genericjobs", Namespace: "ns", Name: "job"}
	for _, pod := range createdOf[*corev1.Pod](kube, "pods") {
		if len(pod.Spec.Volumes) != 1 {
			t.Fatalf("%s's volumes: %+v", pod.Name, pod.Spec.Volumes)
		}
		sources := pod.Spec.Volumes[0].Projected.Sources
		token, caFile := sources[0].ServiceAccountToken, sources[1].ConfigMap
		if token.Audience != progress.Audience(job) || *token.ExpirationSeconds != 3600 || token.Path != "token" ||
			caFile.Name != "job-progress-ca" || caFile.Items[0].Key != "ca.crt" || caFile.Items[0].Path != "ca.crt" {
			t.Errorf("%s's volume: %+v %+v", pod.Name, token, caFile)
		}
		for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			env := map[string]string{}
			for _, e := range ctr.Env {
				env[e.Name] = e.Value
			}
			if env["KUBEFLOW_TRAINER_SERVER_URL"] != "https://ctl.example:10443"+progress.Path(job) ||
				env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] != "/var/run/secrets/kubeflow/trainer/ca.crt" ||
				env["KUBEFLOW_TRAINER_SERVER_TOKEN"] != "/var/run/secrets/kubeflow/trainer/token" {
				t.Errorf("%s/%s's env: %v", pod.Name, ctr.Name, env)
			}
			if m := ctr.VolumeMounts; len(m) != 1 || m[0].MountPath != "/var/run/secrets/kubeflow/trainer" || !m[0].ReadOnly || m[0].Name != pod.Spec.Volumes[0].Name {
				t.Errorf("%s/%s's mounts: %+v", pod.Name, ctr.Name, m)
			}
		}
	}

	// A new CA (the controller's certificate renewed with a new one) updates the ConfigMap.
	st := &Stepper{c: c}
	if err := st.Show(ConfigMapKind, []metav1.Object{cm}); err != nil {
		t.Fatal(err)
	}
	st.Settle("ns/job")
	ca = "-----BEGIN CERTIFICATE-----\nanother CA\n-----END CERTIFICATE-----\n"
	kube.ClearActions()
	if _, err := c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	updated := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "configmaps" {
			updated++
			if got := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).Data["ca.crt"]; got != ca {
				t.Errorf("the ConfigMap updated to %q", got)
			}
		}
	}
	if updated != 1 {
		t.Errorf("%d updates of the ConfigMap after the CA changed, want 1", updated)
	}
}

// TestProgressKeepsTheTemplates: a variable the template sets, and a container that mounts
// something of its own at the directory, are left as they are.
func TestProgressKeepsTheTemplates(t *testing.T) {
	ca := "CA"
	c, kube := progressController(t, &ca, func(int32) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: "busybox", Env: []corev1.EnvVar{{Name: "KUBEFLOW_TRAINER_SERVER_URL", Value: "https://mine"}}},
			{Name: "sidecar", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: "/var/run/secrets/kubeflow/trainer"}}},
		}, Volumes: []corev1.Volume{{Name: "own"}}}}
	})
	if _, err := c.sync(context.Background(), "ns/job"); err != nil {
		t.Fatal(err)
	}
	pod := createdOf[*corev1.Pod](kube, "pods")[0]
	main, sidecar := pod.Spec.Containers[0], pod.Spec.Containers[1]
	if env := notAttempt(main.Env); len(env) != 3 || env[0].Value != "https://mine" || len(main.VolumeMounts) != 1 {
		t.Errorf("main: env %v, mounts %v; want its own URL kept, the two files added", main.Env, main.VolumeMounts)
	}
	if len(notAttempt(sidecar.Env)) != 0 || len(sidecar.VolumeMounts) != 1 || sidecar.VolumeMounts[0].Name != "own" {
		t.Errorf("sidecar: env %v, mounts %v; want it left alone", sidecar.Env, sidecar.VolumeMounts)
	}
}

// TestNoProgressWithoutEndpoint: without the progress endpoint, nothing is added.
func TestNoProgressWithoutEndpoint(t *testing.T) {
	s := newStallTest(t, decisiontest.Job(batch.JobStatus{}))
	s.processOnce(t)
	kube := s.c.clients.Kube.(*kubefake.Clientset)
	if cms := createdOf[*corev1.ConfigMap](kube, "configmaps"); len(cms) != 0 {
		t.Errorf("created %d ConfigMaps", len(cms))
	}
	for _, pod := range createdOf[*corev1.Pod](kube, "pods") {
		if len(pod.Spec.Volumes) != 0 || len(notAttempt(pod.Spec.Containers[0].Env)) != 0 {
			t.Errorf("%s: %+v", pod.Name, pod.Spec)
		}
	}
}

// notAttempt is a container's env without T9K_ATTEMPT, which every pod gets.
func notAttempt(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e.Name != decision.EnvAttempt {
			out = append(out, e)
		}
	}
	return out
}
