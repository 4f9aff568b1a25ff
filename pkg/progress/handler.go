package progress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// handler answers reports. Its checks, in order (docs/progress.md, "The endpoint"): the
// method (405); the overall rate (429); the path (404); the bearer token (401 without one;
// 503 until the caches have synced; 429 past the rate of TokenReviews when its review is not
// cached; 401 for one TokenReview refuses for the job's audience; 403 for one bound to no
// pod); the job (404); the pod, which must be in the cache with the token's UID
// and controlled by the job (403); the pod's rate (429); the body (413 past 64 KiB, 422 for
// anything else wrong). A report refused changes nothing. One accepted is answered 200 with
// the request, as Kubeflow Trainer answers, and written with the job's next status write.
type handler struct {
	kinds  map[string]Kind
	pods   Pods
	auth   *authenticator
	limits *limits
	writer *writer
	clock  clock.PassiveClock
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := h.clock.Now()
	code := h.serve(w, req)
	reports.WithLabelValues(strconv.Itoa(code)).Inc()
	reportDuration.Observe(h.clock.Since(start).Seconds())
}

// serve answers one request and returns the answer's status code.
func (h *handler) serve(w http.ResponseWriter, req *http.Request) int {
	logger := klog.FromContext(req.Context()).WithValues("path", req.URL.Path, "remote", req.RemoteAddr)
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return refuse(w, logger, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "only POST reports progress")
	}
	if wait := h.limits.allowTotal(); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(wait)))
		return refuse(w, logger, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many progress reports: try again later")
	}
	job, ok := parsePath(req.URL.Path)
	if !ok {
		return refuse(w, logger, http.StatusNotFound, metav1.StatusReasonNotFound,
			"no such endpoint: reports go to /apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/{resource}/{name}/status, resource one of "+strings.Join(Resources, ", "))
	}
	logger = logger.WithValues("job", job.String())
	token, ok := bearer(req)
	if !ok {
		return refuse(w, logger, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "no bearer token: send the job's token (the file $KUBEFLOW_TRAINER_SERVER_TOKEN names) as Authorization: Bearer <token>")
	}
	kind := h.kinds[job.Resource]
	if !kind.Synced() || !h.pods.Synced() {
		w.Header().Set("Retry-After", "1")
		return refuse(w, logger, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the controller's caches are not synced yet")
	}
	id, err := h.auth.authenticate(req.Context(), token, Audience(job))
	var tooMany *tooManyReviews
	switch {
	case errors.As(err, &tooMany):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(tooMany.wait)))
		return refuse(w, logger, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, err.Error())
	case errors.Is(err, errUnauthenticated):
		return refuse(w, logger, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err.Error())
	case errors.Is(err, errNotPods):
		return refuse(w, logger, http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
	case err != nil:
		logger.Error(err, "TokenReview failed")
		w.Header().Set("Retry-After", "1")
		return refuse(w, logger, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the token could not be reviewed: try again later")
	}
	logger = logger.WithValues("pod", id.Namespace+"/"+id.Pod)
	cached, err := kind.Get(job.Namespace, job.Name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return refuse(w, logger, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %s/%s not found", job.Resource, job.Namespace, job.Name))
		}
		return refuse(w, logger, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
	}
	pod, ok := h.pods.Get(id.Namespace, id.Pod)
	switch {
	case id.Namespace != job.Namespace:
		return refuse(w, logger, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("pod %s/%s is not of %s %s/%s", id.Namespace, id.Pod, job.Resource, job.Namespace, job.Name))
	case !ok || pod.GetUID() != id.PodUID:
		return refuse(w, logger, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("pod %s (UID %s) is gone", id.Pod, id.PodUID))
	case controllerUID(pod) != cached.GetUID():
		return refuse(w, logger, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("pod %s is not of %s %s/%s", id.Pod, job.Resource, job.Namespace, job.Name))
	}
	if wait := h.limits.allowPod(id.PodUID); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(wait)))
		return refuse(w, logger, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("pod %s reports too often: at most %g a second, bursts of %d", id.Pod, float64(podRate), podBurst))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return refuse(w, logger, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBody))
	case err != nil:
		return refuse(w, logger, http.StatusBadRequest, metav1.StatusReasonBadRequest, "reading the body: "+err.Error())
	}
	report, err := ParseReport(body)
	if err != nil {
		return refuse(w, logger, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
	}
	h.writer.accept(job, cached.GetUID(), &received{Pod: id.Pod, UID: id.PodUID, At: h.clock.Now(), Report: report})
	logger.V(5).Info("Progress reported", "step", report.Step, "percentage", report.Percentage)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return http.StatusOK
}

// bearer is the request's bearer token.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// refuse answers with a metav1.Status, as the API server answers errors.
func refuse(w http.ResponseWriter, logger klog.Logger, code int, reason metav1.StatusReason, message string) int {
	logger.V(2).Info("Progress report refused", "code", code, "reason", reason, "message", message)
	status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(code), Reason: reason, Message: message}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
	return code
}
