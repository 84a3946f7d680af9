// See session_rules.h.
#include "nodessh/session_rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <libssh/libssh.h>

namespace tmpi::nodessh {

Status check_accept_env(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    bool plain =
        !pattern.empty() && pattern.size() <= 256 && std::all_of(pattern.begin(), pattern.end(), [](char c) {
          return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '*' || c == '?';
        });
    if (!plain) {
      return make_error(
          Exit::kUsage,
          "--sshd-accept-env: '{}' is not a variable name or pattern; give names such as LANG or "
          "LC_*, with * and ? only, separated by commas",
          pattern.substr(0, 256));
    }
  }
  return ok_status();
}

AuthVerdict LoginGate::deny() {
  attempted_ = true;
  --tries_left_;
  return tries_left_ <= 0 ? AuthVerdict::kDeniedLast : AuthVerdict::kDenied;
}

AuthVerdict LoginGate::on_publickey(bool is_job_key, bool signed_ok) {
  if (authenticated_ || tries_left_ <= 0) return AuthVerdict::kDeniedLast;
  attempted_ = true;
  if (!is_job_key) return deny();
  if (!signed_ok) return AuthVerdict::kProbeAccepted;
  authenticated_ = true;
  return AuthVerdict::kAccepted;
}

AuthVerdict LoginGate::on_other_method() {
  if (authenticated_ || tries_left_ <= 0) return AuthVerdict::kDeniedLast;
  return deny();
}

AuthVerdict LoginGate::on_none() {
  if (!std::exchange(none_asked_, true) && !authenticated_ && tries_left_ > 0)
    return AuthVerdict::kMethodsListed;
  return on_other_method();
}

Endpoint endpoint_of(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    sockaddr_in v4{};
    std::memcpy(&v4, &address, sizeof v4);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return Endpoint{text, ntohs(v4.sin_port)};
  }
  if (address.ss_family != AF_INET6) return Endpoint{text, 0};
  sockaddr_in6 v6{};
  std::memcpy(&v6, &address, sizeof v6);
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    in_addr v4{};
    std::memcpy(&v4, &v6.sin6_addr.s6_addr[12], sizeof v4);
    inet_ntop(AF_INET, &v4, text, sizeof text);
  } else {
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  }
  return Endpoint{text, ntohs(v6.sin6_port)};
}

std::vector<std::pair<std::string, std::string>> connection_env(const Endpoint& client,
                                                                const Endpoint& server) {
  return {
      {"SSH_CLIENT", fmt::format("{} {} {}", client.address, client.port, server.port)},
      {"SSH_CONNECTION",
       fmt::format("{} {} {} {}", client.address, client.port, server.address, server.port)},
  };
}

std::string describe_refusal(const Refused& refused) {
  std::string to = refused.target.empty() ? "" : fmt::format(" to {}", refused.target);
  switch (refused.type) {
    case SSH_REQUEST_CHANNEL_OPEN:
      switch (refused.subtype) {
        case SSH_CHANNEL_DIRECT_TCPIP:
          return fmt::format("port forwarding (direct-tcpip{}) refused", to);
        case SSH_CHANNEL_FORWARDED_TCPIP:
          return "port forwarding (forwarded-tcpip) refused";
        case SSH_CHANNEL_X11:
          return "an X11 channel refused";
        case SSH_CHANNEL_AUTH_AGENT:
          return "an agent channel refused";
        default:
          return "a channel of an unknown type refused";
      }
    case SSH_REQUEST_GLOBAL:
      switch (refused.subtype) {
        case SSH_GLOBAL_REQUEST_TCPIP_FORWARD:
          return fmt::format("remote port forwarding (tcpip-forward{}) refused", to);
        case SSH_GLOBAL_REQUEST_CANCEL_TCPIP_FORWARD:
          return "cancel-tcpip-forward refused";
        default:
          return "an unknown global request refused";
      }
    case SSH_REQUEST_AUTH:
      return refused.subtype == SSH_AUTH_METHOD_NONE
                 ? "a second \"none\" authentication refused"
                 : "an authentication method other than publickey refused";
    case SSH_REQUEST_SERVICE:
      return "a service request refused";
    case SSH_REQUEST_CHANNEL:
      return "a channel request refused";
    default:
      return "an unknown message refused";
  }
}

}  // namespace tmpi::nodessh
