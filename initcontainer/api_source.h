// The Kubernetes API source of mpi-init (`--jobset NAME` alone): read the JobSet, wait until
// every expected pod exists and has an IP, and get or create the job's SSH Secret.
#pragma once

#include <string>
#include <vector>

#include "common/kube_client.h"
#include "common/topology.h"
#include "initcontainer/sources.h"
#include "initcontainer/ssh_identity.h"

namespace tmpi::init {

struct JobSetInfo {
  std::string name, uid;
  int expected_pods = 0;                    // launcher included
  std::vector<std::string> expected_hosts;  // "<jobset>-<rjob>-<j>-<p>.<subdomain>"
};

Expected<JobSetInfo> get_jobset(KubeClient& client, const std::string& name, const Deadline& deadline);
// The JobSet as the API answered it (`body`, a 200): its uid and the hosts it expects.
Expected<JobSetInfo> jobset_from_answer(const std::string& name, const std::string& body);

struct WaitOptions {
  int page_size = 500;
  Millis progress_every{5000};
};

// Lists the JobSet's pods (paged) until `jobset.expected_pods` are live with an IP. At the
// deadline: Exit::kTempFail, naming each missing pod and why (no pod, no IP yet).
Expected<Topology> wait_for_pods(KubeClient& client, const SourceOptions& options, const JobSetInfo& jobset,
                                 const WaitOptions& wait, const Deadline& deadline);

// "<jobset>-mpi-ssh": the existing Secret's key, or a new Ed25519 key stored as an
// immutable kubernetes.io/ssh-auth Secret owned by the JobSet. A 409 from a launcher that
// raced us means the Secret now exists: read it and use that key. An existing Secret, found
// first or after the 409, is adopted only if check_secret_is_the_jobs passes.
Expected<KeyPair> ensure_job_secret(KubeClient& client, const JobSetInfo& jobset, const Deadline& deadline);

// Whether a Secret as the API answered it (`body`, a 200) is the one mpi-init makes for
// `jobset` in namespace `ns`: owned by the JobSet (an ownerReference of kind JobSet and its
// uid), labelled app.kubernetes.io/managed-by: trainer-mpi, of type kubernetes.io/ssh-auth.
// Anything else may have been made by someone who keeps its key: Exit::kNoPerm, naming the
// Secret, each mark it lacks, and the fix. An answer that is no JSON object: Exit::kData.
Status check_secret_is_the_jobs(const std::string& body, const JobSetInfo& jobset, const std::string& ns);

// The job key in a Secret as the API answered it (`body`, a 200); `where` names it in errors.
Expected<KeyPair> key_from_secret_answer(const std::string& body, const std::string& where);

std::string job_secret_name(const std::string& jobset);

}  // namespace tmpi::init
