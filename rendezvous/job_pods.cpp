// See job_pods.h.
#include "rendezvous/job_pods.h"

#include <fmt/format.h>

#include "common/utf8.h"

namespace tmpi {

namespace {

const KubeAction kListJobPods{"list", "", "pods"};

}  // namespace

Expected<std::vector<PodStatusSummary>> list_job_pods(KubeClient& client, const std::string& jobset,
                                                      const std::vector<std::string>& hosts,
                                                      const Deadline& deadline) {
  const std::string& ns = client.config().namespace_;
  const std::string base = fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}&limit={}", ns,
                                       url_encode("jobset.sigs.k8s.io/jobset-name=" + jobset), kPodPageSize);
  PodStatusReader reader(hosts);
  std::string next;
  int pages = 0;
  do {
    std::string path = next.empty() ? base : base + "&continue=" + url_encode(next);
    TMPI_ASSIGN(KubeResponse page, client.call("GET", path, "", kListJobPods, deadline));
    if (page.status != 200)
      return make_error(Exit::kUnavailable, "list pods in namespace {}: HTTP {}: {}", ns, page.status,
                        truncate_utf8(api_status_message(page.body), 200, "..."));
    TMPI_ASSIGN(next, reader.add(page.body, fmt::format("pods of JobSet {} (page {})", jobset, ++pages)));
  } while (!next.empty() && !reader.all_found() && pages < kMaxPodPages);
  return reader.summaries();
}

}  // namespace tmpi
