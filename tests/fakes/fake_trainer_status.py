#!/usr/bin/env python3
"""fake_trainer_status.py: a faithful fake of Kubeflow Trainer's status server (KEP-2779).

It is a fake only because no Trainer control plane (nor kube-apiserver) can be installed on
the test machines. Like the real one (pkg/statusserver, Trainer v2.2+, feature gate
TrainJobStatus) it serves HTTPS only, routes
POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status,
answers anything else 404 "Not found", and refuses with a metav1.Status body:
  403 Forbidden      the bearer token is not the one for that TrainJob (the real server
                     checks a projected service account token with a TokenReview);
  422 Invalid        a body that does not decode (bad JSON, wrong types, over 64 KiB), or
                     one that the TrainJob CRD's validation refuses: lastUpdatedTime missing
                     (its CEL rule), progressPercentage outside 0..100,
                     estimatedRemainingSeconds < 0, more than 256 metrics, a metric name or
                     value empty or longer than 64 characters;
  404 NotFound       no such TrainJob ("Train job not found");
  200                the decoded payload echoed back; the TrainJob's trainerStatus replaced
                     whole (the metrics list is atomic), an absent trainerStatus ignored.
The token is read from --token-file at each request, so a test can rotate it.

Failure switches: --fail-500 N (the first N valid requests get 500 "Internal error"),
--throttle N (the first N get 429 with Retry-After: --retry-after), --stall N (the first N
requests hang --stall-seconds, then the connection closes), --forbid (every request 403).
Every request is logged to --log as a JSON line: time, path, code, auth (whether the token
matched), and the body when it decoded. The state of each TrainJob goes to --state on exit
and after every change.

usage: fake_trainer_status.py --cert C --key K --token-file T --trainjob NS/NAME --port-file F --log L
"""
import argparse
import json
import os
import re
import threading
import time

from fake_https import FakeHandler, serve, status

ROUTE = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)/status$")
MAX_BODY = 1 << 16
INT32_MAX = 2**31 - 1


def is_int32(value):
    return isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value <= INT32_MAX


def decode(raw):
    """What Go's json.Decoder into UpdateTrainJobStatusRequest accepts; None when it fails."""
    if len(raw) > MAX_BODY:
        return None  # http.MaxBytesReader cuts the body: the decoder fails
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    ts = body.get("trainerStatus")
    if ts is None:
        return body
    if not isinstance(ts, dict):
        return None
    for field in ("progressPercentage", "estimatedRemainingSeconds"):
        if field in ts and ts[field] is not None and not is_int32(ts[field]):
            return None
    metrics = ts.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list):
            return None
        for m in metrics:
            if not isinstance(m, dict) or any(k in m and not isinstance(m[k], str) for k in ("name", "value")):
                return None
    when = ts.get("lastUpdatedTime")
    if when is not None:
        if not isinstance(when, str) or not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", when):
            return None
    return body


def validate(name, ts):
    """The CRD's validation of status.trainerStatus, as the apiserver words it."""
    errors = []
    field = "status.trainerStatus"
    if not ts.get("lastUpdatedTime"):
        errors.append(f"{field}: Invalid value: \"object\": lastUpdatedTime is required when trainerStatus is present")
    pct = ts.get("progressPercentage")
    if pct is not None and pct < 0:
        errors.append(f"{field}.progressPercentage: Invalid value: {pct}: {field}.progressPercentage in body "
                      "should be greater than or equal to 0")
    if pct is not None and pct > 100:
        errors.append(f"{field}.progressPercentage: Invalid value: {pct}: {field}.progressPercentage in body "
                      "should be less than or equal to 100")
    eta = ts.get("estimatedRemainingSeconds")
    if eta is not None and eta < 0:
        errors.append(f"{field}.estimatedRemainingSeconds: Invalid value: {eta}: {field}.estimatedRemainingSeconds "
                      "in body should be greater than or equal to 0")
    metrics = ts.get("metrics") or []
    if len(metrics) > 256:
        errors.append(f"{field}.metrics: Too many: {len(metrics)}: must have at most 256 items")
    for i, m in enumerate(metrics[:256]):
        for key in ("name", "value"):
            text = m.get(key, "")
            if len(text) < 1:
                errors.append(f"{field}.metrics[{i}].{key}: Required value")
            elif len(text) > 64:
                errors.append(f"{field}.metrics[{i}].{key}: Too long: may not be more than 64 bytes")
    if not errors:
        return None
    return f'TrainJob.trainer.kubeflow.org "{name}" is invalid: ' + (
        errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.requests = 0
        self.valid = 0
        self.trainjobs = {}
        for key in args.trainjob:
            self.trainjobs[tuple(key.split("/", 1))] = {"trainerStatus": None}

    def save(self):
        if self.args.state:
            data = {f"{ns}/{name}": tj for (ns, name), tj in self.trainjobs.items()}
            with open(self.args.state + ".tmp", "w") as f:
                json.dump(data, f)
            os.rename(self.args.state + ".tmp", self.args.state)


class Handler(FakeHandler):
    state: State = None

    def reply(self, code, body, headers=None, logged=None, auth=False):
        self.send_json(code, body, headers)
        entry = {"time": time.time(), "method": self.command, "path": self.path, "code": code, "auth": auth}
        if logged is not None:
            entry["body"] = logged
        self.write_log(entry)

    def handle_any(self):
        st = self.state
        raw = self.read_request()
        if raw is None:
            return
        match = ROUTE.match(self.path)
        if self.command != "POST" or not match:
            return self.reply(*status(404, "NotFound", "Not found"))
        ns, name = match.group(1), match.group(2)
        with open(st.args.token_file) as f:
            token = f.read().strip()
        auth = self.headers.get("Authorization") == f"Bearer {token}"
        if not auth or st.args.forbid:
            return self.reply(*status(403, "Forbidden", "Forbidden"), auth=auth)
        body = decode(raw)
        if body is None:
            return self.reply(*status(422, "Invalid", "Invalid payload"), auth=auth)
        with st.lock:
            st.valid += 1
            v = st.valid
        if v <= st.args.throttle:
            return self.reply(*status(429, "TooManyRequests", "Too many requests"),
                              {"Retry-After": str(st.args.retry_after)}, logged=body, auth=auth)
        if v <= st.args.throttle + st.args.fail_500:
            return self.reply(*status(500, "InternalError", "Internal error"), logged=body, auth=auth)
        ts = body.get("trainerStatus")
        if ts is None:
            return self.reply(200, body, logged=body, auth=auth)
        message = validate(name, ts)
        if message:
            return self.reply(*status(422, "Invalid", message), logged=body, auth=auth)
        with st.lock:
            if (ns, name) not in st.trainjobs:
                missing = True
            else:
                missing = False
                st.trainjobs[(ns, name)]["trainerStatus"] = ts
                st.save()
        if missing:
            return self.reply(*status(404, "NotFound", "Train job not found"), logged=body, auth=auth)
        return self.reply(200, body, logged=body, auth=auth)


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--cert", "--key", "--token-file", "--port-file", "--log"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--trainjob", action="append", default=[], help="NAMESPACE/NAME of a TrainJob that exists")
    parser.add_argument("--state", default="")
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--throttle", type=int, default=0)
    parser.add_argument("--retry-after", type=int, default=1)
    parser.add_argument("--fail-500", type=int, default=0)
    parser.add_argument("--stall", type=int, default=0)
    parser.add_argument("--stall-seconds", type=float, default=30)
    parser.add_argument("--forbid", action="store_true")
    args = parser.parse_args()
    Handler.state = State(args)
    Handler.state.save()
    serve(Handler, args, args.address)

if __name__ == "__main__":
    main()
