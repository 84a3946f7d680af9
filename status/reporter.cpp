// See reporter.h. One worker thread owns the HTTP client; the callers' threads only touch
// the state under the mutex, so update() costs a lock and a notify.
#include "status/reporter.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include <spdlog/spdlog.h>

#include "common/files.h"
#include "common/utf8.h"

namespace tmpi::status {

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// What a refusal that no retry can fix means, for the one warning the reporter prints.
std::string hint(long http_status) {
  switch (http_status) {
    case 403:
      return "the token was refused: is this pod part of the TrainJob that the URL names?";
    case 404:
      return "no such TrainJob at that URL (or the server does not know this path)";
    case 422:
      return "the server refused the payload: please report this trainer-mpi bug";
    default:
      return "the server refused the update";
  }
}

bool retryable(long http_status) {
  return http_status == 408 || http_status == 429 || http_status >= 500;
}

}  // namespace

Millis retry_wait(const std::string& retry_after, Millis backoff, Millis longest) {
  if (retry_after.empty()) return backoff;
  // Honoured up to --retry's longest wait: a server's "Retry-After: 99999999999" must neither
  // overflow the arithmetic nor silence the job's status for good.
  long long seconds = 0;
  std::errc error = std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), seconds).ec;
  if (error == std::errc::result_out_of_range) seconds = std::numeric_limits<long long>::max();
  if ((error == std::errc() || error == std::errc::result_out_of_range) && seconds > 0) {
    return std::max(backoff, seconds > longest.count() / 1000 ? longest : Millis(seconds * 1000));
  }
  return backoff;
}

std::optional<ReporterConfig> config_from_environment() {
  ReporterConfig config;
  config.url = env("KUBEFLOW_TRAINER_SERVER_URL");
  if (config.url.empty()) return std::nullopt;
  config.token_file = env("KUBEFLOW_TRAINER_SERVER_TOKEN");
  config.ca_file = env("KUBEFLOW_TRAINER_SERVER_CA_CERT");
  return config;
}

StatusReporter::StatusReporter(ReporterConfig config, SendFn send, TimeSource& clock)
    : config_(std::move(config)),
      send_(std::move(send)),
      clock_(clock),
      backoff_(config_.retry_initial, config_.retry_max) {
  if (!send_) {
    TlsConfig tls;
    tls.ca_file = config_.ca_file;
    auto client = std::make_shared<HttpClient>(tls);
    send_ = [client](const HttpRequest& request) { return client->send(request); };
  }
  worker_ = std::thread([this] { run(); });
}

StatusReporter::~StatusReporter() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  clock_.notify_all(wake_);
  worker_.join();
}

void StatusReporter::update(const JobHealth& health) {
  {
    std::lock_guard lock(mutex_);
    if (counts_.gave_up || final_deadline_) return;
    if (pending_ ? *pending_ == health : last_accepted_ == health) return;  // nothing new to say
    pending_ = health;
  }
  clock_.notify_all(wake_);
}

void StatusReporter::post_final(const JobHealth& health, Millis within) {
  {
    std::lock_guard lock(mutex_);
    if (counts_.gave_up || final_deadline_) return;
    pending_ = health;
    final_deadline_ = clock_.now() + within;
  }
  clock_.notify_all(wake_);
}

bool StatusReporter::wait_final() {
  std::unique_lock lock(mutex_);
  if (!final_deadline_) return false;
  clock_.wait_until(wake_, lock, *final_deadline_, [this] { return final_accepted_ || counts_.gave_up; });
  return final_accepted_;
}

StatusReporter::Counts StatusReporter::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void StatusReporter::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!pending_ || counts_.gave_up || final_accepted_) {
      clock_.wait(wake_, lock);
      continue;
    }
    if (final_deadline_ && clock_.now() >= *final_deadline_) {  // too late: finish() has returned
      clock_.wait(wake_, lock);
      continue;
    }
    // The final state skips the interval; a backoff only as far as one try before the deadline.
    auto due = next_allowed_;
    if (final_deadline_)
      due = in_backoff_ ? std::min(next_allowed_, *final_deadline_ - config_.request_timeout / 2)
                        : clock_.now();
    if (clock_.now() < due) {
      clock_.wait_once(wake_, lock, due);
      continue;
    }
    JobHealth sending = *pending_;
    pending_.reset();
    bool final = final_deadline_.has_value();
    Millis timeout = config_.request_timeout;
    if (final)
      timeout = std::max(
          Millis(1), std::min(timeout, std::chrono::duration_cast<Millis>(*final_deadline_ - clock_.now())));
    ++counts_.posted;
    lock.unlock();
    auto answer = post(sending, timeout);
    lock.lock();
    settle(sending, answer);
    if (final && final_accepted_) spdlog::debug("status: the final state was accepted");
    clock_.notify_all(wake_);
  }
}

Expected<HttpResponse> StatusReporter::post(const JobHealth& health, Millis timeout) {
  HttpRequest request;
  request.method = "POST";
  request.url = config_.url;
  request.timeout = timeout;
  request.max_body = std::size_t{4} << 20;  // the server's answer is a Status or the TrainJob
  request.body = dump_json(status_body(health, std::chrono::system_clock::now()));
  request.headers.emplace_back("Content-Type: application/json");
  if (!config_.token_file.empty()) {
    auto token = read_file(config_.token_file);  // again each time: the kubelet rotates it
    if (!token)
      return make_error(Exit::kIo, "the token file {} cannot be read: {}", config_.token_file,
                        token.error().message);
    std::string bearer = *token;
    while (!bearer.empty() && (bearer.back() == '\n' || bearer.back() == '\r' || bearer.back() == ' '))
      bearer.pop_back();
    request.headers.push_back("Authorization: Bearer " + bearer);
  }
  return send_(request);
}

void StatusReporter::settle(const JobHealth& sent, const Expected<HttpResponse>& answer) {
  bool final = final_deadline_.has_value() && !pending_;
  if (answer && answer->status / 100 == 2) {
    if (counts_.failed > 0 && in_backoff_) spdlog::info("status: updates accepted again");
    ++counts_.accepted;
    last_accepted_ = sent;
    in_backoff_ = false;
    backoff_ = Backoff(config_.retry_initial, config_.retry_max);
    next_allowed_ = clock_.now() + config_.interval;
    if (final) final_accepted_ = true;
    return;
  }
  ++counts_.failed;
  if (answer && !retryable(answer->status)) {
    counts_.gave_up = true;
    spdlog::warn("status: {} refused the TrainJob status update ({}); {}; no more updates will be sent",
                 config_.url, describe_answer(answer->status, answer->body), hint(answer->status));
    return;
  }
  Millis wait = backoff_.next();
  if (answer) wait = retry_wait(answer->retry_after, wait, config_.retry_max);
  std::string why = answer ? describe_answer(answer->status, answer->body) : answer.error().message;
  if (!in_backoff_) {
    spdlog::warn("status: update to {} failed ({}); retrying in {} ms, the job goes on", config_.url, why,
                 wait.count());
  } else {
    spdlog::debug("status: update failed again ({}); retrying in {} ms", why, wait.count());
  }
  if (!pending_) pending_ = sent;  // a newer state, if one came meanwhile, wins
  in_backoff_ = true;
  next_allowed_ = clock_.now() + wait;
}

}  // namespace tmpi::status
