// Topology sources and writers: pod lists (filtering, order, twins, GPUs), hosts.json round
// trips, and every bad-input error (hostfiles and the static spec: hostfile_test.cpp).
#include "common/topology.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "initcontainer/sources.h"

namespace tmpi::init {
namespace {

using nlohmann::json;

json pod(const std::string& jobset, const std::string& rjob, int job, int index, int gpus = 0) {
  std::string host = fmt::format("{}-{}-{}-{}", jobset, rjob, job, index);
  json p = {{"metadata",
             {{"name", host + "-abcde"},
              {"creationTimestamp", "2026-11-29T10:00:00Z"},
              {"labels",
               {{"jobset.sigs.k8s.io/jobset-name", jobset},
                {"jobset.sigs.k8s.io/replicatedjob-name", rjob},
                {"jobset.sigs.k8s.io/job-index", std::to_string(job)},
                {"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
            {"spec",
             {{"hostname", host},
              {"subdomain", jobset},
              {"containers", json::array({{{"name", rjob}, {"image", "x"}}})}}},
            {"status", {{"phase", "Running"}, {"podIP", fmt::format("10.0.{}.{}", job, index + 2)}}}};
  if (gpus > 0) p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  return p;
}

std::string list_of(const std::vector<json>& pods) {
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", pods}}.dump();
}

std::vector<std::string> names(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& h : t.hosts) out.push_back(h.name);
  return out;
}

TEST(PodList, OrdersByReplicatedJobThenIndexesAndFindsTheLauncher) {
  auto t = topology_from_pod_list(
      list_of({pod("job", "node", 0, 1), pod("job", "node", 0, 0), pod("job", "launcher", 0, 0)}),
      "pods.json", {});
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(names(*t), (std::vector<std::string>{"job-node-0-0.job", "job-node-0-1.job"}));
  ASSERT_TRUE(t->launcher);
  EXPECT_EQ(t->launcher->name, "job-launcher-0-0.job");
  EXPECT_EQ(t->hosts[1].address, "10.0.0.3");
  EXPECT_EQ(t->hosts[1].pod, "job-node-0-1-abcde");
  EXPECT_EQ(t->subdomain, "job");
}

TEST(PodList, CompletionIndexOrdersNumericallyNotAsText) {
  std::vector<json> pods;
  for (int i = 11; i >= 0; --i) pods.push_back(pod("job", "node", 0, i));
  auto t = topology_from_pod_list(list_of(pods), "pods.json", {});
  ASSERT_TRUE(t);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(t->hosts[i].pod_index, i);
}

TEST(PodList, GlobalIndexGivesReplicatedJobOrder) {
  auto a = pod("job", "zeta", 0, 0), b = pod("job", "alpha", 0, 0);
  a["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] = "0";
  b["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] = "1";
  auto t = topology_from_pod_list(list_of({b, a}), "pods.json", {});
  ASSERT_TRUE(t);
  EXPECT_EQ(names(*t), (std::vector<std::string>{"job-zeta-0-0.job", "job-alpha-0-0.job"}));
}

TEST(PodList, LauncherAsNodeComesFirst) {
  SourceOptions options;
  options.launcher_as_node = true;
  auto t =
      topology_from_pod_list(list_of({pod("job", "node", 0, 0), pod("job", "launcher", 0, 0)}), "p", options);
  ASSERT_TRUE(t);
  EXPECT_EQ(names(*t), (std::vector<std::string>{"job-launcher-0-0.job", "job-node-0-0.job"}));
  EXPECT_EQ(t->hosts[0].role, PodRole::kLauncher);
}

TEST(PodList, SlotsFromGpuLimitsForHeterogeneousGroups) {
  auto t = topology_from_pod_list(
      list_of({pod("job", "big", 0, 0, 8), pod("job", "small", 0, 0, 2), pod("job", "cpu", 0, 0)}), "p", {});
  ASSERT_TRUE(t);
  std::map<std::string, int> slots;
  for (const auto& h : t->hosts) slots[h.group] = h.slots;
  EXPECT_EQ(slots["big"], 8);
  EXPECT_EQ(slots["small"], 2);
  EXPECT_EQ(slots["cpu"], 1);
  EXPECT_EQ(t->hosts[0].gpus, 8);
  SourceOptions fixed;
  fixed.slots = 3;
  auto f = topology_from_pod_list(list_of({pod("job", "big", 0, 0, 8)}), "p", fixed);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->hosts[0].slots, 3);
}

TEST(PodList, TerminatingAndFailedPodsAreLeftOutWithANote) {
  auto gone = pod("job", "node", 0, 1);
  gone["metadata"]["deletionTimestamp"] = "2026-11-29T10:05:00Z";
  auto failed = pod("job", "node", 0, 2);
  failed["status"]["phase"] = "Failed";
  auto t = topology_from_pod_list(list_of({pod("job", "node", 0, 0), gone, failed}), "p", {});
  ASSERT_TRUE(t);
  EXPECT_EQ(names(*t), (std::vector<std::string>{"job-node-0-0.job"}));
  ASSERT_EQ(t->notes.size(), 2U);
  EXPECT_NE(t->notes[0].find("terminating"), std::string::npos);
  EXPECT_NE(t->notes[1].find("Failed"), std::string::npos);
}

TEST(PodList, StaleTwinNeverReplacesTheLivePod) {
  auto old_pod = pod("job", "node", 0, 0), new_pod = pod("job", "node", 0, 0);
  old_pod["metadata"]["name"] = "old";
  new_pod["metadata"]["name"] = "new";
  new_pod["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1";
  new_pod["metadata"]["creationTimestamp"] = "2026-11-29T09:00:00Z";  // older clock, newer attempt
  for (const auto& order : {std::vector<json>{old_pod, new_pod}, std::vector<json>{new_pod, old_pod}}) {
    auto t = topology_from_pod_list(list_of(order), "p", {});
    ASSERT_TRUE(t);
    ASSERT_EQ(t->hosts.size(), 1U);
    EXPECT_EQ(t->hosts[0].pod, "new");
    EXPECT_NE(t->notes.back().find("stale twin"), std::string::npos);
  }
}

TEST(PodList, OtherJobSetsAreFilteredOrNamed) {
  std::string mixed = list_of({pod("a", "node", 0, 0), pod("b", "node", 0, 0), pod("b", "node", 0, 1)});
  auto ambiguous = topology_from_pod_list(mixed, "pods.json", {});
  ASSERT_FALSE(ambiguous);
  EXPECT_EQ(ambiguous.error().exit, Exit::kData);
  EXPECT_NE(ambiguous.error().message.find("a, b"), std::string::npos) << ambiguous.error().message;
  EXPECT_NE(ambiguous.error().message.find("--jobset"), std::string::npos);
  SourceOptions only_b;
  only_b.jobset = "b";
  auto t = topology_from_pod_list(mixed, "pods.json", only_b);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->hosts.size(), 2U);
}

TEST(PodList, BadInputNamesTheFileAndField) {
  auto bad_json = topology_from_pod_list("{\"items\": [", "pods.json", {});
  ASSERT_FALSE(bad_json);
  EXPECT_NE(bad_json.error().message.find("pods.json: not valid JSON"), std::string::npos);
  auto no_items = topology_from_pod_list("{}", "pods.json", {});
  ASSERT_FALSE(no_items);
  EXPECT_NE(no_items.error().message.find("\"items\""), std::string::npos);
  auto p = pod("job", "node", 0, 0);
  p["spec"].erase("subdomain");
  auto no_sub = topology_from_pod_list(list_of({p}), "pods.json", {});
  ASSERT_FALSE(no_sub);
  EXPECT_NE(no_sub.error().message.find("items[0]"), std::string::npos) << no_sub.error().message;
  EXPECT_NE(no_sub.error().message.find("spec.subdomain"), std::string::npos);
  auto two =
      topology_from_pod_list(list_of({pod("job", "launcher", 0, 0), pod("job", "launcher", 0, 1)}), "p", {});
  EXPECT_FALSE(two);
}

// A cut download, bytes that are not UTF-8, and fields of the wrong type: a clear error that
// names the file and the byte, or a pod read as well as it can be; never an internal error.
TEST(PodList, TruncatedNonUtf8AndWrongTypedInput) {
  std::string list = list_of({pod("job", "node", 0, 0), pod("job", "node", 0, 1)});
  auto cut = topology_from_pod_list(list.substr(0, list.size() / 2), "pods.json", {});
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().exit, Exit::kData);
  EXPECT_NE(cut.error().message.find("pods.json: not valid JSON (syntax error at byte"), std::string::npos)
      << cut.error().message;
  std::string latin1 = list;
  latin1.replace(latin1.find("abcde"), 1, "\xe9");
  auto bad = topology_from_pod_list(latin1, "pods.json", {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find(fmt::format("byte {}", list.find("abcde"))), std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("UTF-8"), std::string::npos) << bad.error().message;

  auto odd = pod("job", "node", 0, 0);
  odd["spec"]["containers"] = json::array({5});  // threw from nlohmann's value() before
  odd["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = 7;
  odd["status"] = "Running";
  auto read = topology_from_pod_list(list_of({odd}), "pods.json", {});
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->hosts[0].slots, 1);
  EXPECT_EQ(read->hosts[0].address, "");

  auto scalar = topology_from_pod_list(json{{"items", json::array({pod("job", "node", 0, 0), 5})}}.dump(),
                                       "pods.json", {});
  ASSERT_FALSE(scalar);
  EXPECT_NE(scalar.error().message.find("items[1] has no metadata object"), std::string::npos)
      << scalar.error().message;
  auto not_list = topology_from_pod_list("[]", "pods.json", {});
  ASSERT_FALSE(not_list);
  EXPECT_NE(not_list.error().message.find("\"items\" is missing or not an array"), std::string::npos);
}

TEST(Render, HostsJsonRoundTripsAndIsStable) {
  auto t =
      topology_from_pod_list(list_of({pod("job", "launcher", 0, 0), pod("job", "node", 0, 0, 4)}), "p", {});
  ASSERT_TRUE(t);
  std::string first = render_hosts_json(*t);
  auto back = parse_hosts_json(first, "hosts.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(render_hosts_json(*back), first);
  EXPECT_EQ(back->hosts[0].gpus, 4);
  EXPECT_EQ(back->launcher->address, "10.0.0.2");
  EXPECT_FALSE(parse_hosts_json("[]", "hosts.json"));
  EXPECT_FALSE(parse_hosts_json(R"({"hosts":[{"slots":1}]})", "hosts.json"));
}

// Every source is held to the parameters' bounds (--slots, --np, the API's hosts), so that no
// sum of slots overflows and no plan of ranks fills a pod's memory; hosts.json's fields are
// read by type, never by an exception.
TEST(Bounds, SlotsAndHostsBeyondAnyJobAreRefusedWithTheirSource) {
  auto refused = [](const Expected<Topology>& t, Exit exit, const std::string& words) {
    ASSERT_FALSE(t) << words;
    EXPECT_EQ(t.error().exit, exit) << t.error().message;
    EXPECT_NE(t.error().message.find(words), std::string::npos) << t.error().message;
  };
  refused(topology_from_hostfile("a slots=2147483647\nb slots=2147483647\n", "hf", {}), Exit::kData,
          "hf line 1: slots=2147483647; a host has from 1 to 1048576 slots");
  refused(topology_from_hostfile("a slots=99999999999999999999\n", "hf", {}), Exit::kData, "hf line 1");
  std::string many;
  for (int i = 0; i < 17; ++i) many += fmt::format("h{} slots=1048576\n", i);
  refused(topology_from_hostfile(many, "hf", {}), Exit::kData,
          "17825792 slots in all; a job has at most 16777216");
  EXPECT_TRUE(topology_from_hostfile("a slots=1048576\n", "hf", {}));
  json huge = pod("job", "node", 0, 0);
  huge["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4294967304LL;  // not 8
  refused(topology_from_pod_list(list_of({huge}), "p", {}), Exit::kData, "has 2147483647 slots");
  SourceOptions options;
  options.jobset = "train";
  refused(topology_from_static({"node=1000000x1000000"}, options), Exit::kUsage,
          "a job has at most 100000 hosts");
  for (const char* bad :
       {R"({"jobset": 7, "hosts": [{"name": "a"}]})", R"({"hosts": [{"name": "a", "slots": 1e100}]})",
        R"({"hosts": [{"name": "a", "slots": 4294967304}]})", R"({"hosts": [{"name": "a", "role": null}]})",
        R"({"hosts": [{"name": ["a"]}]})"}) {
    refused(parse_hosts_json(bad, "hosts.json"), Exit::kData, "hosts.json");
  }
  auto fine = parse_hosts_json(R"({"hosts": [{"name": "a", "slots": 3, "gpus": 2}]})", "hosts.json");
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_EQ(fine->hosts[0].slots, 3);
  EXPECT_EQ(fine->hosts[0].role, PodRole::kNode);
  // A role is read once, as its enum: one that is neither is named, with the two there are.
  refused(parse_hosts_json(R"({"hosts": [{"name": "a", "role": "boss"}]})", "hosts.json"), Exit::kData,
          R"("role" must be "launcher" or "node", not "boss")");
  auto launcher = parse_hosts_json(R"({"hosts": [{"name": "a", "role": "launcher"}]})", "hosts.json");
  ASSERT_TRUE(launcher) << launcher.error().message;
  EXPECT_EQ(launcher->hosts[0].role, PodRole::kLauncher);
}

// A host with only a name and an address.
Host host_at(std::string name, std::string address) {
  Host host;
  host.name = std::move(name);
  host.address = std::move(address);
  return host;
}

TEST(Names, OnlyRfc1123NamesAndIpAddressesPass) {
  for (const char* good :
       {"job-node-0-1.job", "a", "node-0", "A1.example.com", "198.18.0.2", "fd00::1", "::1", "x.y-z.0"}) {
    EXPECT_TRUE(valid_host_name(good)) << good;
  }
  std::string long_label(64, 'a');
  for (std::string bad : {std::string(""), std::string("-node"), std::string("node-"), std::string("a..b"),
                          std::string(".a"), std::string("a."), std::string("node 1"), std::string("n\nx"),
                          std::string("*"), std::string("$(reboot)"), std::string("a_b"), long_label,
                          std::string("caf\xc3\xa9"), std::string("n;rm")}) {
    EXPECT_FALSE(valid_host_name(bad)) << bad;
  }
  EXPECT_TRUE(valid_address("10.0.0.1"));
  EXPECT_TRUE(valid_address("fe80::1"));
  EXPECT_FALSE(valid_address("10.0.0.256"));
  EXPECT_FALSE(valid_address("10.0.0.1\n* ssh-ed25519"));
  EXPECT_FALSE(valid_address(""));
}

TEST(Names, HostileFieldsNeverReachAFile) {
  // A name with a line break would add hostfile lines, or a '*' known_hosts entry that
  // matches every host; $(...) would run in discover_hosts.sh.
  for (std::string hostile : {std::string("node-0\nevil slots=64"), std::string("*"),
                              std::string("$(touch /tmp/x)"), std::string("node-0 slots=9")}) {
    Topology topology;
    topology.hosts.push_back(host_at(hostile, "10.0.0.1"));
    auto checked = validate_topology(topology, "pods.json");
    ASSERT_FALSE(checked) << hostile;
    EXPECT_EQ(checked.error().exit, Exit::kData);
    EXPECT_NE(checked.error().message.find("is not an RFC 1123 DNS name"), std::string::npos)
        << checked.error().message;
    EXPECT_EQ(checked.error().message.find('\n'), std::string::npos) << "the message shows the name escaped";
  }
  Topology topology;
  topology.hosts.push_back(host_at("node-0", "10.0.0.1\n@cert-authority *"));
  ASSERT_FALSE(validate_topology(topology, "pods.json"));
  topology.hosts[0].address = "10.0.0.1";
  topology.launcher = host_at("launcher-0 *", "10.0.0.2");
  ASSERT_FALSE(validate_topology(topology, "pods.json"));
  topology.launcher.reset();
  topology.subdomain = "sub$(id)";
  ASSERT_FALSE(validate_topology(topology, "pods.json"));
}

}  // namespace
}  // namespace tmpi::init
