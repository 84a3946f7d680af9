// The status reporter against the faithful fake Trainer status server
// (tests/fakes/fake_trainer_status.py), over HTTPS with a CA made for this test: the
// TrainJob gets the launcher's state, the final one with progressPercentage 100; 500s are
// retried; a 403 stops the updates and says why without the token; a server whose
// certificate the CA did not sign is never trusted; the fake refuses what the real CRD
// refuses, with the same metav1.Status bodies.
//
// The requests go over real sockets, in real time; the reporter's intervals and backoffs
// pass on a manual clock (common/clock.h) whose autopilot moves it whenever the reporter's
// worker and the test's thread both wait on it, so no test sleeps for them.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/files.h"
#include "status/reporter.h"

namespace tmpi::status {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kPath = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/train/status";

class FakeStatusServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tmpi-status-server-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // A CA, and a certificate for 127.0.0.1 that it signs; another CA that signs nothing.
    std::string command = "bash " TMPI_SOURCE_DIR "/tests/fakes/make_test_ca.sh " + dir_.string() + " other";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  void SetUp() override {
    clock_.autopilot(2);  // the reporter's worker and the test's thread
    ++run_;
    token_file_ = path("token");
    ASSERT_TRUE(write_atomic(token_file_, "projected-sa-token-" + std::to_string(run_) + "\n"));
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  std::string path(const std::string& name) const {
    return (dir_ / (name + "." + std::to_string(run_))).string();
  }

  // Starts the fake with these switches; returns the URL of TrainJob team-a/train.
  std::string start(std::vector<std::string> switches = {}) {
    std::vector<std::string> argv = {"python3",      TMPI_SOURCE_DIR "/tests/fakes/fake_trainer_status.py",
                                     "--cert",       (dir_ / "server.crt").string(),
                                     "--key",        (dir_ / "server.key").string(),
                                     "--token-file", token_file_,
                                     "--trainjob",   "team-a/train",
                                     "--port-file",  path("port"),
                                     "--log",        path("log"),
                                     "--state",      path("state")};
    argv.insert(argv.end(), switches.begin(), switches.end());
    // Built before the fork: the autopilot's thread runs, and a child may not allocate
    // (common/exec_plan.h).
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      sigset_t none;  // every signal deliverable, whatever a test before this one blocked
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execvp("python3", args.data());
      ::_exit(127);
    }
    for (int i = 0; i < 600 && !fs::exists(path("port")); ++i) std::this_thread::sleep_for(25ms);  // 15 s
    auto port = read_file(path("port"));
    EXPECT_TRUE(port) << "the fake did not start";
    return "https://127.0.0.1:" + (port ? *port : std::string("1")) + kPath;
  }

  ReporterConfig config(const std::string& url, const std::string& ca = "ca") const {
    ReporterConfig config;
    config.url = url;
    config.token_file = token_file_;
    config.ca_file = (dir_ / (ca + ".crt")).string();
    config.interval = 50ms;
    config.retry_initial = 50ms;
    config.retry_max = 200ms;
    config.request_timeout = 2s;
    return config;
  }

  nlohmann::json trainer_status() const {
    auto text = read_file(path("state"));
    return text ? nlohmann::json::parse(*text)["team-a/train"]["trainerStatus"] : nlohmann::json();
  }
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream log(path("log"));
    for (std::string line; std::getline(log, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  static inline fs::path dir_;
  static inline int run_ = 0;
  ManualClock clock_;  // a member: it outlives the reporters of the tests' bodies
  std::string token_file_;
  pid_t pid_ = -1;
};

JobHealth health(const std::string& phase, int running) {
  JobHealth h;
  h.phase = phase;
  h.hosts_ready = h.hosts_total = 2;
  h.ranks_total = 4;
  h.ranks_running = running;
  return h;
}

std::string status_metric(const nlohmann::json& status, const std::string& name) {
  for (const auto& m : status.value("metrics", nlohmann::json::array())) {
    if (m["name"] == name) return m["value"];
  }
  return "<absent>";
}

TEST_F(FakeStatusServer, TheTrainJobGetsTheStateAndTheFinalOne) {
  std::string url = start();
  StatusReporter reporter(config(url), {}, clock_);
  reporter.update(health("Running", 4));
  for (int i = 0; i < 500 && reporter.counts().accepted == 0; ++i) clock_.sleep_for(20ms);  // 10 s
  EXPECT_EQ(status_metric(trainer_status(), "mpi_phase"), "Running");
  EXPECT_TRUE(reporter.finish(health("Succeeded", 0), 5s));
  auto status = trainer_status();
  EXPECT_EQ(status_metric(status, "mpi_phase"), "Succeeded");
  EXPECT_EQ(status["progressPercentage"], 100);
  for (const auto& request : requests()) EXPECT_TRUE(request["auth"].get<bool>()) << request;
}

TEST_F(FakeStatusServer, ServerErrorsAreRetried) {
  std::string url = start({"--fail-500", "2"});
  StatusReporter reporter(config(url), {}, clock_);
  EXPECT_TRUE(reporter.finish(health("Failed", 0), 5s));
  auto counts = reporter.counts();
  EXPECT_EQ(counts.failed, 2);
  EXPECT_EQ(counts.accepted, 1);
  EXPECT_EQ(status_metric(trainer_status(), "mpi_phase"), "Failed");
}

TEST_F(FakeStatusServer, AForbiddenTokenStopsTheUpdatesAndNeverReachesTheLog) {
  std::string url = start({"--forbid"});
  std::string logged;
  {
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    {
      StatusReporter reporter(config(url), {}, clock_);
      reporter.update(health("Running", 4));
      EXPECT_FALSE(reporter.finish(health("Failed", 0), 2s));
      EXPECT_TRUE(reporter.counts().gave_up);
      EXPECT_EQ(reporter.counts().posted, 1);
    }
    spdlog::default_logger()->flush();
    logged = testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
  }
  EXPECT_NE(logged.find("HTTP 403 Forbidden"), std::string::npos) << logged;
  EXPECT_NE(logged.find("is this pod part of the TrainJob"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("projected-sa-token"), std::string::npos) << "the token reached the log: " << logged;
}

// On the real clock: a final deadline nearer than half a request timeout (1 s here, 2 s)
// leaves the reporter no backoff to wait, so it tries again at once until the deadline,
// and on a manual clock, which moves only while the worker waits, that time never comes.
TEST_F(FakeStatusServer, AServerThatTheCaDidNotSignIsNotTrusted) {
  std::string url = start();
  StatusReporter reporter(config(url, "other"));
  EXPECT_FALSE(reporter.finish(health("Failed", 0), 1s));
  EXPECT_GE(reporter.counts().failed, 1);
  EXPECT_FALSE(reporter.counts().gave_up);  // maybe the CA is being rotated: retried
  EXPECT_TRUE(requests().empty()) << "a request got through the TLS handshake";
}

TEST_F(FakeStatusServer, TheFakeRefusesWhatTheCrdRefuses) {
  std::string url = start();
  TlsConfig tls;
  tls.ca_file = config(url).ca_file;
  HttpClient client(tls);
  auto token = read_file(token_file_);
  ASSERT_TRUE(token);
  auto post = [&](const std::string& body) {
    HttpRequest request;
    request.method = "POST";
    request.url = url;
    request.body = body;
    request.headers = {"Authorization: Bearer " + token->substr(0, token->size() - 1)};
    auto answer = client.send(request);
    EXPECT_TRUE(answer);
    return answer ? describe_answer(answer->status, answer->body) : std::string();
  };
  EXPECT_EQ(post(R"({"trainerStatus":{"progressPercentage":101,"lastUpdatedTime":"2026-11-30T00:00:00Z"}})"),
            "HTTP 422 Invalid: TrainJob.trainer.kubeflow.org \"train\" is invalid: "
            "status.trainerStatus.progressPercentage: "
            "Invalid value: 101: status.trainerStatus.progressPercentage in body should be less than or "
            "equal to 100");
  EXPECT_NE(post(R"({"trainerStatus":{"metrics":[]}})").find("lastUpdatedTime is required"),
            std::string::npos);
  EXPECT_EQ(post(R"({"trainerStatus":{"progressPercentage":"half"}})"), "HTTP 422 Invalid: Invalid payload");
  EXPECT_EQ(post(std::string(70000, ' ') + "{}"), "HTTP 422 Invalid: Invalid payload");
  HttpRequest other;
  other.method = "POST";
  other.url = url.substr(0, url.find("/apis/")) +
              "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/gone/status";
  other.body = R"({"trainerStatus":{"lastUpdatedTime":"2026-11-30T00:00:00Z"}})";
  other.headers = {"Authorization: Bearer " + token->substr(0, token->size() - 1)};
  auto answer = client.send(other);
  ASSERT_TRUE(answer);
  EXPECT_EQ(describe_answer(answer->status, answer->body), "HTTP 404 NotFound: Train job not found");
}

}  // namespace
}  // namespace tmpi::status
