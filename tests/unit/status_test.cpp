// The TrainJob status payload (pure) and the reporter's timing rules, driven through a
// recording transport: the interval, unchanged states, retries with backoff, giving up on
// refusals no retry can fix, and a final update that is bounded by its deadline. The same
// reporter against the faithful fake server, over HTTPS, is status_server_test.cpp.
//
// The reporter runs on a manual clock (common/clock.h) whose autopilot jumps to the next
// deadline once both the worker and the test's thread sleep on it: the intervals, backoffs
// and deadlines below are the reporter's own, checked to the millisecond, in no real time.
// The test waits on that clock too, and its pauses are the clock's, never real sleeps.
#include <atomic>
#include <deque>
#include <filesystem>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/files.h"
#include "status/reporter.h"

namespace tmpi::status {
namespace {

using namespace std::chrono_literals;

JobHealth running(int ranks_running) {
  JobHealth health;
  health.phase = "Running";
  health.hosts_ready = health.hosts_total = 2;
  health.ranks_total = 4;
  health.ranks_running = ranks_running;
  return health;
}

std::string metric(const nlohmann::json& body, const std::string& name) {
  for (const auto& m : body["trainerStatus"]["metrics"]) {
    if (m["name"] == name) return m["value"];
  }
  return "<absent>";
}

TEST(StatusBody, CarriesTheJobsHealthAsStringMetrics) {
  JobHealth health = running(3);
  health.ranks_failed = 1;
  health.first_failure = "rank 1 on train-node-0-0 exited with code 3 after 2 s";
  health.busbw_gbps = 181.4567;
  auto when = std::chrono::system_clock::from_time_t(1795744503);  // 2026-11-27T01:55:03Z
  auto body = status_body(health, when);
  EXPECT_EQ(body["trainerStatus"]["lastUpdatedTime"], "2026-11-27T01:55:03Z");
  EXPECT_EQ(metric(body, "mpi_phase"), "Running");
  EXPECT_EQ(metric(body, "mpi_hosts_ready"), "2/2");
  EXPECT_EQ(metric(body, "mpi_ranks_running"), "3");
  EXPECT_EQ(metric(body, "mpi_ranks_failed"), "1");
  EXPECT_EQ(metric(body, "mpi_first_failure"), "rank 1 on train-node-0-0 exited with code 3 after 2 s");
  EXPECT_EQ(metric(body, "nccl_busbw_gbps"), "181.457");
  EXPECT_EQ(metric(body, "nccl_slowest_host"), "<absent>");            // the API refuses empty values
  EXPECT_FALSE(body["trainerStatus"].contains("progressPercentage"));  // unknown while running
}

TEST(StatusBody, KeepsToTheApiLimits) {
  JobHealth health = running(0);
  health.phase = "Succeeded";
  health.exit_code = 0;
  health.first_failure = std::string(100, 'x');
  auto body = status_body(health, std::chrono::system_clock::now());
  std::string cut = metric(body, "mpi_first_failure");
  EXPECT_EQ(cut.size(), kMaxMetricText);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ(body["trainerStatus"]["progressPercentage"], 100);
  EXPECT_EQ(metric(body, "mpi_exit_code"), "0");
  for (const auto& m : body["trainerStatus"]["metrics"]) {
    EXPECT_GE(m["name"].get<std::string>().size(), 1U);
    EXPECT_GE(m["value"].get<std::string>().size(), 1U);
  }
  EXPECT_LE(body.dump().size(), kMaxBody);
}

TEST(StatusBody, DescribesTheServersAnswer) {
  EXPECT_EQ(
      describe_answer(
          403,
          R"({"kind":"Status","status":"Failure","message":"Forbidden","reason":"Forbidden","code":403})"),
      "HTTP 403 Forbidden: Forbidden");
  EXPECT_EQ(describe_answer(502, "<html>bad\ngateway</html>"), "HTTP 502: <html>bad gateway</html>");
  // Fields of other types are not the server's words, and must not throw (the reporter's thread).
  EXPECT_EQ(describe_answer(503, R"({"kind":"Status","message":null,"reason":{}})"), "HTTP 503 : ");
  EXPECT_EQ(describe_answer(500, R"({"kind":1})"), R"(HTTP 500: {"kind":1})");
  EXPECT_EQ(describe_answer(500, R"({"kind":"Status","reason":"A\nB","message":"two\nlines"})"),
            "HTTP 500 A B: two lines");
}

// A transport that records every request and answers from a script (200 when it runs out).
// A delay stalls each request on the manual clock, as a server that does not answer would.
class Recorder {
 public:
  explicit Recorder(ManualClock& clock, std::deque<long> answers = {}, Millis delay = 0ms,
                    std::string error_body = R"({"kind":"Status","message":"no","reason":"X"})",
                    std::string retry_after = "")
      : clock_(clock),
        answers_(std::move(answers)),
        delay_(delay),
        error_body_(std::move(error_body)),
        retry_after_(std::move(retry_after)) {}
  SendFn fn() {
    return [this](const HttpRequest& request) -> Expected<HttpResponse> {
      if (delay_ > 0ms) clock_.sleep_for(std::min(delay_, request.timeout));
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      if (delay_ > request.timeout) return make_error(Exit::kTempFail, "Timeout was reached");
      long code = 200;
      if (!answers_.empty()) {
        code = answers_.front();
        answers_.pop_front();
      }
      if (code == 200) return HttpResponse{code, request.body, ""};
      return HttpResponse{code, error_body_, retry_after_};
    };
  }
  std::vector<HttpRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::vector<nlohmann::json> bodies() {
    std::vector<nlohmann::json> out;
    for (const auto& r : requests()) out.push_back(nlohmann::json::parse(r.body));
    return out;
  }

 private:
  ManualClock& clock_;
  std::mutex mutex_;
  std::deque<long> answers_;
  Millis delay_;
  std::string error_body_, retry_after_;
  std::vector<HttpRequest> requests_;
};

ReporterConfig test_config(Millis interval) {
  ReporterConfig config;
  config.url = "https://trainer.test/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status";
  config.interval = interval;
  config.retry_initial = 50ms;
  config.retry_max = 200ms;
  config.request_timeout = 2s;
  return config;
}

template <typename F>
bool eventually(ManualClock& clock, F done, Millis within = 3s) {
  auto end = clock.now() + within;
  while (clock.now() < end) {
    if (done()) return true;
    clock.sleep_for(5ms);
  }
  return done();
}

// Each test's clock is declared first, so that it outlives the reporter that waits on it;
// autopilot(2): the reporter's worker and the test's own thread.
TEST(StatusReporter, PostsAtMostOncePerIntervalAndOnlyWhatChanged) {
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock);
  StatusReporter reporter(test_config(1s), recorder.fn(), clock);
  reporter.update(running(1));
  ASSERT_TRUE(eventually(clock, [&] { return recorder.requests().size() == 1; }));
  auto first_post = clock.now();
  for (int i = 2; i <= 4; ++i) reporter.update(running(i));  // within the interval: only the newest goes
  reporter.update(running(4));                               // unchanged: nothing new
  clock.sleep_for(300ms);
  EXPECT_EQ(recorder.requests().size(), 1U) << "posted inside the interval";
  ASSERT_TRUE(eventually(clock, [&] { return recorder.requests().size() == 2; }));
  EXPECT_GE(clock.now() - first_post, 1s - 5ms) << "the second post came before the interval";
  clock.sleep_for(1500ms);
  auto bodies = recorder.bodies();
  ASSERT_EQ(bodies.size(), 2U) << "an unchanged state was posted again";
  EXPECT_EQ(metric(bodies[0], "mpi_ranks_running"), "1");
  EXPECT_EQ(metric(bodies[1], "mpi_ranks_running"), "4");
  HttpRequest first = recorder.requests()[0];
  EXPECT_NE(std::find(first.headers.begin(), first.headers.end(), "Content-Type: application/json"),
            first.headers.end());
  EXPECT_EQ(first.method, "POST");
}

TEST(StatusReporter, TheFinalStateSkipsTheIntervalAndLaterUpdatesAreIgnored) {
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock);
  StatusReporter reporter(test_config(10s), recorder.fn(), clock);
  reporter.update(running(4));
  ASSERT_TRUE(eventually(clock, [&] { return recorder.requests().size() == 1; }));
  JobHealth done = running(0);
  done.phase = "Succeeded";
  auto start = clock.now();
  EXPECT_TRUE(reporter.finish(done, 5s));
  EXPECT_LT(clock.now() - start, 2s) << "the final state waited for the 10 s interval";
  reporter.update(running(2));
  clock.sleep_for(100ms);
  auto bodies = recorder.bodies();
  ASSERT_EQ(bodies.size(), 2U);
  EXPECT_EQ(metric(bodies[1], "mpi_phase"), "Succeeded");
}

TEST(StatusReporter, RetriesServerErrorsWithBackoffThenGoesOn) {
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock, {500, 429, 503});
  StatusReporter reporter(test_config(50ms), recorder.fn(), clock);
  auto start = clock.now();
  reporter.update(running(4));
  ASSERT_TRUE(eventually(clock, [&] { return reporter.counts().accepted == 1; }));
  // Three waits of [25, 50], [50, 100] and [100, 200] ms (the cap doubles up to 200 ms).
  EXPECT_GE(clock.now() - start, 175ms) << "retried without backing off";
  auto requests = recorder.requests();
  ASSERT_EQ(requests.size(), 4U);
  EXPECT_EQ(requests[3].body.find("\"Running\"") != std::string::npos, true);  // the same state, retried
  auto counts = reporter.counts();
  EXPECT_EQ(counts.failed, 3);
  EXPECT_FALSE(counts.gave_up);
}

// A hostile or broken server: an error body whose fields have other types, and a Retry-After
// beyond any clock. The reporter's thread goes on (no std::terminate), waits at most
// --retry's longest wait (200 ms here), and the update lands.
TEST(StatusReporter, AHostileAnswerNeitherEndsTheLauncherNorSilencesIt) {
  for (const char* retry_after : {"99999999999999999999", "9223372036854775807", "86400", "-5", "soon"}) {
    ManualClock clock;
    clock.autopilot(2);
    Recorder recorder(clock, {503, 429}, 0ms, R"({"kind":"Status","message":null,"reason":[1]})",
                      retry_after);
    StatusReporter reporter(test_config(50ms), recorder.fn(), clock);
    auto start = clock.now();
    reporter.update(running(4));
    ASSERT_TRUE(eventually(clock, [&] { return reporter.counts().accepted == 1; })) << retry_after;
    EXPECT_LE(clock.now() - start, 500ms) << "Retry-After " << retry_after << " held the updates back";
    EXPECT_EQ(reporter.counts().failed, 2) << retry_after;
  }
}

TEST(StatusReporter, TheFinalStateIsTriedBeforeItsDeadlineEvenInALongBackoff) {
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock, {503});
  ReporterConfig config = test_config(10ms);
  config.retry_initial = config.retry_max = 8s;  // the next try would be 4-8 s away
  StatusReporter reporter(config, recorder.fn(), clock);
  reporter.update(running(4));
  ASSERT_TRUE(eventually(clock, [&] { return reporter.counts().failed == 1; }));
  JobHealth failed = running(0);
  failed.phase = "Failed";
  auto start = clock.now();
  EXPECT_TRUE(reporter.finish(failed, 3s));
  EXPECT_LT(clock.now() - start, 3s);
  auto bodies = recorder.bodies();
  ASSERT_EQ(bodies.size(), 2U);
  EXPECT_EQ(metric(bodies[1], "mpi_phase"), "Failed");
}

TEST(StatusReporter, GivesUpOnRefusalsThatNoRetryCanFix) {
  for (long code : {403L, 404L, 422L}) {
    ManualClock clock;
    clock.autopilot(2);
    Recorder recorder(clock, {code});
    StatusReporter reporter(test_config(10ms), recorder.fn(), clock);
    reporter.update(running(1));
    ASSERT_TRUE(eventually(clock, [&] { return reporter.counts().gave_up; })) << code;
    reporter.update(running(2));
    JobHealth failed = running(0);
    failed.phase = "Failed";
    EXPECT_FALSE(reporter.finish(failed, 1s)) << code;
    EXPECT_EQ(recorder.requests().size(), 1U) << "posted again after HTTP " << code;
  }
}

TEST(StatusReporter, AStalledServerCannotHoldTheJobPastTheFinalDeadline) {
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock, {}, 5s);  // every request hangs until its timeout
  auto start = clock.now();
  {
    StatusReporter reporter(test_config(10ms), recorder.fn(), clock);
    reporter.update(running(1));  // in flight, stalled, when the job ends
    clock.sleep_for(50ms);
    JobHealth failed = running(0);
    failed.phase = "Failed";
    EXPECT_FALSE(reporter.finish(failed, 500ms));
    EXPECT_LT(clock.now() - start, 1500ms) << "finish() waited past its deadline";
    clock.sleep_for(2500ms);  // the request in flight ends (2 s timeout); then?
    EXPECT_LE(recorder.requests().size(), 2U) << "posts went on after the final deadline";
  }
  // The destructor waits at most for a request in flight, which its own timeout ends.
}

TEST(StatusReporter, ReadsTheTokenFileForEveryRequest) {
  auto dir = std::filesystem::temp_directory_path() / ("tmpi-status-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string token_file = (dir / "token").string();
  ASSERT_TRUE(write_atomic(token_file, "first-token\n"));
  ManualClock clock;
  clock.autopilot(2);
  Recorder recorder(clock);
  ReporterConfig config = test_config(10ms);
  config.token_file = token_file;
  StatusReporter reporter(config, recorder.fn(), clock);
  reporter.update(running(1));
  ASSERT_TRUE(eventually(clock, [&] { return recorder.requests().size() == 1; }));
  ASSERT_TRUE(write_atomic(token_file, "rotated-token"));  // the kubelet's rotation
  reporter.update(running(2));
  ASSERT_TRUE(eventually(clock, [&] { return recorder.requests().size() == 2; }));
  auto has = [](const HttpRequest& r, const std::string& header) {
    return std::find(r.headers.begin(), r.headers.end(), header) != r.headers.end();
  };
  auto requests = recorder.requests();
  EXPECT_TRUE(has(requests[0], "Authorization: Bearer first-token"));
  EXPECT_TRUE(has(requests[1], "Authorization: Bearer rotated-token"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmpi::status
