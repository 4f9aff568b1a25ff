"""Report a training's progress to its job's status, from inside the job's pod.

    from t9k_progress import report
    for step in range(total):
        ...
        report(step=step + 1, total_steps=total, epoch=epoch, loss=f"{loss:.4f}")

The controller tells every pod where to report (docs/progress.md) with Kubeflow Trainer's
variables, and this sends Trainer's request, so the same script reports under either:
KUBEFLOW_TRAINER_SERVER_URL, the CA file KUBEFLOW_TRAINER_SERVER_CA_CERT and the token file
KUBEFLOW_TRAINER_SERVER_TOKEN (read at each report: the kubelet renews it).

report() never raises and never blocks long: outside such a pod it does nothing; a report
that fails is written to stderr and dropped. It sends at most one report every
T9K_PROGRESS_INTERVAL seconds (5 by default; the controller writes a job's status at most
every 5 s anyway), and always the one whose step reaches total_steps. Standard library only.
"""
import datetime
import json
import os
import ssl
import sys
import time
import urllib.request

_last = None  # when the last report was sent (time.monotonic())
_ssl = (None, None)  # (the CA file's mtime, its SSL context)


def report(step=None, total_steps=None, epoch=None, total_epochs=None, eta_seconds=None, **metrics):
    """Report progress; True when the controller accepted it. Metrics are sent as strings."""
    global _last
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    if not url:
        return False
    now = time.monotonic()
    final = step is not None and total_steps is not None and step >= total_steps
    if _last is not None and now - _last < float(os.environ.get("T9K_PROGRESS_INTERVAL", "5")) and not final:
        return False
    _last = now
    try:
        named = [("currentStep", step), ("totalSteps", total_steps), ("currentEpoch", epoch), ("totalEpochs", total_epochs)]
        sent = [{"name": n, "value": str(int(v))} for n, v in named if v is not None]
        sent += [{"name": str(n)[:64], "value": str(v)[:64] or "-"} for n, v in metrics.items()]
        status = {"metrics": sent, "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if step is not None and total_steps:
            status["progressPercentage"] = max(0, min(100, int(step * 100 // total_steps)))
        if eta_seconds is not None:
            status["estimatedRemainingSeconds"] = max(0, int(eta_seconds))
        with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
            token = f.read().strip()
        request = urllib.request.Request(url, data=json.dumps({"trainerStatus": status}).encode(), method="POST",
                                         headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5, context=_context()) as answer:
            return 200 <= answer.status < 300
    except Exception as e:  # a report must never stop the training
        detail = e.read().decode(errors="replace")[:300] if hasattr(e, "read") else ""
        print(f"t9k_progress: report not sent: {e} {detail}".rstrip(), file=sys.stderr, flush=True)
        return False


def _context():
    """The SSL context that trusts the controller's CA, made again when the file changes."""
    global _ssl
    ca = os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"]
    mtime = os.stat(ca).st_mtime
    if _ssl[0] != mtime:
        _ssl = (mtime, ssl.create_default_context(cafile=ca))
    return _ssl[1]
