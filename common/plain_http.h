// One plain-HTTP request to a peer inside the job (the coordinator), on Boost.Beast with
// a deadline. The rank agent uses it instead of libcurl: it starts once per rank, and a
// binary that needs no libcurl (nor the TLS stack behind it) loads in a fraction of the
// time (bench/rows/launcher.sh measures the launcher's overhead over plain mpirun).
#pragma once

#include <string>

#include "common/backoff.h"
#include "common/error.h"
#include "common/http_client.h"

namespace tmpi {

// address: "host:port", host a name or an IP literal ("10.0.0.5", "[fd00::5]": connected to
// without a lookup, so that the whole request is under `timeout`; a name's lookup is not).
// Any HTTP status is a response; a transport failure or the deadline is an Error.
Expected<HttpResponse> plain_http(const std::string& method, const std::string& address,
                                  const std::string& target, const std::string& body, Millis timeout);

}  // namespace tmpi
