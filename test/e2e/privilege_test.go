package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	batch "github.com/t9k-jobs/t9k-jobs/pkg/apis/batch/v1beta1"
)

// TestControllerLeastPrivilege: with the controller's own ServiceAccount token (the suite's
// controller runs with it), what manifests/rbac.yaml allows and its admission policy refuses.
func TestControllerLeastPrivilege(t *testing.T) {
	parallel(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", controller.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	checkLeastPrivilege(t, kubernetes.NewForConfigOrDie(cfg))
}

// checkLeastPrivilege checks, with a client of the controller's ServiceAccount, that it may
// take Leases in t9k-system only; that it may write a job's child in a job's namespace; and
// that the admission policy refuses what RBAC cannot: the controller's own Deployment, any
// write in t9k-system but its Lease, any in the cluster's own namespaces (a job's child too),
// and anywhere what no job owns (a job's label is not enough; nor is giving a user's object
// a job's owner), each with the policy's message.
func checkLeastPrivilege(t *testing.T, sa kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		ns, verb string
		want     bool
	}{{"t9k-system", "update", true}, {"t9k-system", "create", true}, {"kube-system", "update", false}, {"default", "create", false}} {
		review, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: "coordination.k8s.io", Resource: "leases"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.want {
			t.Errorf("the controller may %s Leases in %s: %v, want %v", c.verb, c.ns, review.Status.Allowed, c.want)
		}
	}

	// Objects of the admin's that are no job's: a Deployment in t9k-system standing for the
	// controller's own, a ConfigMap in kube-system.
	admin := env.kube
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "privilege-check", Namespace: "t9k-system"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "privilege-check"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "privilege-check"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "controller"}}}}}}
	if _, err := admin.AppsV1().Deployments("t9k-system").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.AppsV1().Deployments("t9k-system").Delete(context.Background(), deployment.Name, metav1.DeleteOptions{})
	})
	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "privilege-check", Namespace: "kube-system"}}
	if _, err := admin.CoreV1().ConfigMaps("kube-system").Create(ctx, configMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), configMap.Name, metav1.DeleteOptions{})
	})

	refused := func(what string, err error, because string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), because) {
			t.Errorf("%s with the controller's token: %v, want it refused: %q", what, err, because)
		}
	}
	const (
		inOwnNamespace      = "writes nothing in its own namespace t9k-system but its Lease"
		inClusterNamespaces = "writes nothing in the cluster's own namespaces"
		notAJobs            = "writes only its jobs' children"
	)
	// A job's child as the controller makes it: a controller owner reference to a job.
	owned := metav1.ObjectMeta{Name: "privilege-check", Labels: map[string]string{batch.LabelJobName: "x"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: batch.SchemeGroupVersion.String(), Kind: "GenericJob", Name: "x", UID: "x-uid", Controller: ptr.To(true)}}}
	image := deployment.DeepCopy()
	image.Spec.Template.Spec.Containers[0].Image = "someone-else"
	_, err := sa.AppsV1().Deployments("t9k-system").Update(ctx, image, metav1.UpdateOptions{})
	refused("changing a Deployment's image in t9k-system", err, inOwnNamespace)
	ownedConfigMap := &corev1.ConfigMap{ObjectMeta: owned}
	_, err = sa.CoreV1().ConfigMaps("t9k-system").Create(ctx, ownedConfigMap, metav1.CreateOptions{})
	refused("creating a job's ConfigMap in t9k-system", err, inOwnNamespace)
	ownedPod := &corev1.Pod{ObjectMeta: owned, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "anything"}}}}
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		_, err = sa.CoreV1().Pods(ns).Create(ctx, ownedPod, metav1.CreateOptions{})
		refused("creating a job's pod in "+ns, err, inClusterNamespaces)
	}
	err = sa.CoreV1().ConfigMaps("kube-system").Delete(ctx, configMap.Name, metav1.DeleteOptions{})
	refused("deleting a ConfigMap in kube-system", err, inClusterNamespaces)
	if _, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, configMap.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap the controller's token may not delete: %v", err)
	}

	// In a job's namespace: what carries the job's label but no job's owner reference, what a
	// Deployment owns, and a user's object given a job's owner reference are refused.
	ns := namespace(t)
	labelledOnly := ownedPod.DeepCopy()
	labelledOnly.OwnerReferences = nil
	_, err = sa.CoreV1().Pods(ns).Create(ctx, labelledOnly, metav1.CreateOptions{})
	refused("creating a pod with a job's label and no owner", err, notAJobs)
	otherOwner := ownedPod.DeepCopy()
	otherOwner.OwnerReferences[0].APIVersion, otherOwner.OwnerReferences[0].Kind = "apps/v1", "ReplicaSet"
	_, err = sa.CoreV1().Pods(ns).Create(ctx, otherOwner, metav1.CreateOptions{})
	refused("creating a pod a ReplicaSet owns", err, notAJobs)
	users, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taken := users.DeepCopy()
	taken.OwnerReferences = owned.OwnerReferences
	_, err = sa.CoreV1().ConfigMaps(ns).Update(ctx, taken, metav1.UpdateOptions{})
	refused("giving a user's ConfigMap a job's owner reference", err, notAJobs)

	// A job's child, in a job's namespace: allowed, as every job the suite runs shows. Its
	// owner does not exist, so the garbage collector may delete it between the two calls: a
	// delete that finds nothing proves nothing, and is tried again on a new one.
	for attempt := 1; ; attempt++ {
		if _, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, ownedConfigMap, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating a job's ConfigMap in %s with the controller's token: %v", ns, err)
		}
		err := sa.CoreV1().ConfigMaps(ns).Delete(ctx, ownedConfigMap.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) && attempt < 5 {
			continue
		}
		if err != nil {
			t.Errorf("deleting a job's ConfigMap in %s with the controller's token: %v", ns, err)
		}
		break
	}
}
