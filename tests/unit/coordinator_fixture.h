// The rendezvous engine's test fixture (coordinator_test.cpp, coordinator_ranks_test.cpp):
// a coordinator of three hosts on a fixed clock, the events it reports, and the calls a
// sidecar makes, signed with the job's key as a sidecar signs them.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv::coordinator_testing {

using nlohmann::json;
using namespace std::chrono_literals;

inline const std::string kCoordinatorKey =
    derive_rendezvous_key("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n");
inline const std::vector<std::string> kHosts = {"j-node-0-0.j", "j-node-0-1.j", "j-node-0-2.j"};
inline const std::map<std::string, std::string> kAddress = {
    {"j-node-0-0.j", "10.0.0.1"}, {"j-node-0-1.j", "10.0.0.2"}, {"j-node-0-2.j", "10.0.0.3"}};

struct Events {
  std::vector<std::string> progress, refused, lost, deadline;
  int opened = 0;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : coordinator_(config(), callbacks(), t0_) {}

  CoordinatorConfig config() {
    CoordinatorConfig c;
    c.hosts = kHosts;
    c.key = kCoordinatorKey;
    c.lost_after = 15s;
    c.deadline = 60s;
    c.progress_every = 5s;
    return c;
  }
  CoordinatorCallbacks callbacks() {
    CoordinatorCallbacks c;
    c.progress = [this](const std::string& line) { events_.progress.push_back(line); };
    c.barrier_open = [this] { ++events_.opened; };
    c.deadline = [this](const std::string& s) { events_.deadline.push_back(s); };
    c.host_lost = [this](const std::string& h, const std::string& why) {
      events_.lost.push_back(h + ": " + why);
    };
    c.refused = [this](const std::string& what) { events_.refused.push_back(what); };
    return c;
  }

  static Call register_call(const std::string& host, bool ssh_ready = true,
                            const std::string& key = kCoordinatorKey, std::string nonce = "") {
    if (nonce.empty()) nonce = random_nonce();
    Registration message{host, 8, 8, ssh_ready, ssh_ready ? "" : "sshd refused the job key", "0.1.0", nonce};
    auto address = kAddress.count(host) > 0 ? kAddress.at(host) : "10.9.9.9";
    return Call{"POST", "/v1/register", signed_body(key, message), address, {address}};
  }
  static Call beat_call(const std::string& host, long long seq) {
    return Call{"POST", "/v1/beat", signed_body(kCoordinatorKey, Beat{host, seq}), kAddress.at(host), {}};
  }
  Reply send(const Call& call, std::chrono::seconds at = 0s) { return coordinator_.handle(call, t0_ + at); }

  Clock::time_point t0_ = Clock::time_point{} + 1000h;
  Events events_;
  Coordinator coordinator_;
};

}  // namespace tmpi::rdv::coordinator_testing
