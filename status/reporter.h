// Sends the job's health to the Trainer status server without ever holding up the job.
// update() only stores the newest state and wakes a worker thread; the worker posts it at
// most once per interval (an unchanged state is not posted again), retries a refused
// connection, a 429 or a 5xx with backoff and jitter, and gives up for good on 403, 404 or
// 422, which no retry can fix (it says why, once). finish() posts the final state at once
// and waits for it, but never past its own deadline.
//
// The bearer token is the file KUBEFLOW_TRAINER_SERVER_TOKEN names, read again for every
// request (the kubelet rotates the projected token); it is never logged.
//
// Every wait and every reading of the time goes through a TimeSource (common/clock.h): the
// real clock in the programs, a manual one in tests, which then pass intervals, backoffs
// and deadlines in no real time.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/backoff.h"
#include "common/http_client.h"
#include "status/trainer_status.h"

namespace tmpi::status {

struct ReporterConfig {
  std::string url;         // KUBEFLOW_TRAINER_SERVER_URL: .../namespaces/NS/trainjobs/NAME/status
  std::string token_file;  // KUBEFLOW_TRAINER_SERVER_TOKEN
  std::string ca_file;     // KUBEFLOW_TRAINER_SERVER_CA_CERT; empty: the system's CAs
  Millis interval{5000};   // at most one update per interval, the final one excepted
  Millis request_timeout{5000};
  Millis retry_initial{500}, retry_max{30000};
};

// Trainer's variables, as its TrainJobStatus plugin injects them; nullopt when the URL is
// not set (the feature gate is off, or this is not a TrainJob).
std::optional<ReporterConfig> config_from_environment();

// The wait before retrying an answer with this Retry-After header (any text, as the server
// sent it): `backoff`, or the header's whole seconds when longer, but never over `longest`.
// Pure, so that a fuzzer reaches it.
Millis retry_wait(const std::string& retry_after, Millis backoff, Millis longest);

// One POST. HttpClient in the binaries; tests may pass their own.
using SendFn = std::function<Expected<HttpResponse>(const HttpRequest&)>;

class StatusReporter {
 public:
  explicit StatusReporter(ReporterConfig config, SendFn send = {}, TimeSource& clock = real_time());
  StatusReporter(const StatusReporter&) = delete;
  StatusReporter& operator=(const StatusReporter&) = delete;
  ~StatusReporter();  // stops the worker; an update still waiting is dropped

  void update(const JobHealth& health);
  // The final state: posted at once (a backoff in progress is cut short so that one try
  // still comes before the deadline); later update() calls are ignored. Does not wait.
  void post_final(const JobHealth& health, Millis within);
  // Waits until the server accepts the final state, gives up, or its deadline passes.
  // Returns whether it was accepted.
  bool wait_final();
  bool finish(const JobHealth& health, Millis within) {
    post_final(health, within);
    return wait_final();
  }

  struct Counts {
    int posted = 0, accepted = 0, failed = 0;
    bool gave_up = false;
  };
  Counts counts() const;

 private:
  void run();
  Expected<HttpResponse> post(const JobHealth& health, Millis timeout);
  void settle(const JobHealth& sent, const Expected<HttpResponse>& answer);  // under the mutex

  ReporterConfig config_;
  SendFn send_;
  TimeSource& clock_;
  Backoff backoff_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<JobHealth> pending_, last_accepted_;
  Clock::time_point next_allowed_{};
  std::optional<Clock::time_point> final_deadline_;
  bool in_backoff_ = false, final_accepted_ = false, stop_ = false;
  Counts counts_;
  std::thread worker_;
};

}  // namespace tmpi::status
