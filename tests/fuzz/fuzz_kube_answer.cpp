// libFuzzer target: the Kubernetes API's answers as mpi-init and the launcher read them
// (outside input: the API server, or whatever stands in between). The first line is the
// answer's Retry-After header, the rest its body, which every parser reads in turn: a pod
// list page (again as the next page while it names a `continue`), a JobSet (as mpi-init and as
// the in-place agent read it), a Secret (whose
// it is, then its key) and a metav1.Status error. Each gives a value or an Error, never a
// crash, hang or leak; what they accept must hold the bounds the programs rely on.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/kube_client.h"
#include "common/topology.h"
#include "initcontainer/api_source.h"
#include "initcontainer/sources.h"
#include "rendezvous/inplace_barrier.h"

namespace {

// The pages of one list as wait_for_pods reads them; a loop of `continue` tokens ends at a
// few pages here, as the API's deadline ends it there.
void read_pod_pages(const std::string& body, bool launcher_as_node) {
  tmpi::init::SourceOptions options;
  options.launcher_as_node = launcher_as_node;
  tmpi::init::PodListReader reader(options);
  for (int page = 1; page <= 3; ++page) {
    auto next = reader.add(body, "fuzz");
    if (!next || next->empty()) break;
  }
  for (const auto& [name, address] : reader.live_hosts()) {
    if (name.empty()) std::abort();
  }
  if (auto topology = reader.topology("fuzz"); topology) {
    if (!tmpi::validate_topology(*topology, "fuzz")) std::abort();
  }
}

void read_jobset(const std::string& body) {
  auto info = tmpi::init::jobset_from_answer("job", body);
  if (!info) return;
  if (info->uid.empty() || info->expected_pods != static_cast<int>(info->expected_hosts.size()) ||
      info->expected_hosts.size() > 100000) {
    std::abort();
  }
}

void read_secret(const std::string& body) {
  // Whose the Secret is: the job's own, refused as not (exit 77), or no object (exit 65).
  tmpi::init::JobSetInfo jobset;
  jobset.name = "job";
  jobset.uid = "7d3c1f00-1111-2222-3333-444455556666";
  auto owned = tmpi::init::check_secret_is_the_jobs(body, jobset, "fuzz");
  if (!owned && owned.error().exit != tmpi::Exit::kNoPerm && owned.error().exit != tmpi::Exit::kData)
    std::abort();
  auto key = tmpi::init::key_from_secret_answer(body, "Secret fuzz/job-mpi-ssh");
  if (!key) return;
  if (key->private_key.empty() || key->private_key.back() != '\n' || key->public_line.empty()) std::abort();
}

// The in-place agent's reading of its JobSet, and its decision on it: any attempt it would
// write is one past what it read, in int32.
void read_inplace(const std::string& body) {
  auto view = tmpi::rdv::inplace::parse_jobset(body, "job");
  if (!view) return;
  auto next = tmpi::rdv::inplace::decide({}, *view);
  if (next.step == tmpi::rdv::inplace::Step::kWrite && view->current && next.attempt != *view->current + 1)
    std::abort();
  (void)tmpi::rdv::inplace::parse_attempt(body.substr(0, 16));
}

void read_error(const std::string& retry_after, const std::string& body) {
  std::string message = tmpi::api_status_message(body);
  (void)message;
  tmpi::Millis backoff(250);
  tmpi::Millis wait = tmpi::retry_after_wait(retry_after, backoff);
  if (wait < backoff || wait > tmpi::Millis(99999 * 1000)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t line_end = text.find('\n');
  std::string retry_after(text.substr(0, line_end));
  std::string body(line_end == std::string_view::npos ? std::string_view() : text.substr(line_end + 1));
  read_pod_pages(body, size % 2 == 0);
  read_jobset(body);
  read_secret(body);
  read_inplace(body);
  read_error(retry_after, body);
  return 0;
}
