// mpi-sshd: the node's own SSH server, for MPI's daemons and for a person debugging by hand.
// It needs no passwd entry, no nss_wrapper, no /run/sshd and no capability: it runs as
// whatever uid the pod has, and every command runs as that uid (docs/design.md, "The node
// SSH server"). The edge only: flags to SshdOptions, then nodessh/server.h.
#include <unistd.h>

#include <iostream>

#include <spdlog/spdlog.h>

#include "common/cli.h"
#include "common/log.h"
#include "common/params.h"
#include "nodessh/server.h"
#include "nodessh/session_rules.h"

namespace tmpi::nodessh {

namespace {

constexpr const char* kSynopsis =
    "mpi-sshd [options]   the job's SSH server, in the node pod's main container";

Expected<SshdOptions> options_from(const Params& params) {
  SshdOptions options;
  options.ssh_dir = params.str(param::kSshDir);
  options.listen_address = params.str(param::kListenAddress);
  options.port = static_cast<int>(params.integer(param::kSshPort));
  options.max_connections = static_cast<int>(params.integer(param::kSshdMaxConnections));
  options.max_startups = static_cast<int>(params.integer(param::kSshdMaxStartups));
  options.per_source_startups = static_cast<int>(params.integer(param::kSshdPerSourceStartups));
  options.login_grace = params.duration(param::kSshdLoginGrace);
  options.max_auth_tries = static_cast<int>(params.integer(param::kSshdAuthTries));
  options.accept_env = params.list(param::kSshdAcceptEnv);
  options.hangup_grace = params.duration(param::kSshdHangupGrace);
  TMPI_CHECK(check_accept_env(options.accept_env));
  return options;
}

Status run(const std::vector<std::string>& args) {
  TMPI_ASSIGN(Params params, Params::parse(kScopeSshd, args, current_environment()));
  if (params.help_requested()) {
    std::cout << help_text(kSynopsis, kScopeSshd);
    return ok_status();
  }
  TMPI_CHECK(log::setup_from("mpi-sshd", params));
  if (!params.positional().empty()) {
    return make_error(Exit::kUsage, "mpi-sshd takes no command, but was given '{}'; see --help",
                      params.positional().front());
  }
  TMPI_ASSIGN(SshdOptions options, options_from(params));
  TMPI_ASSIGN(auto server, Server::open(options));
  spdlog::info("mpi-sshd on port {} ({}), uid {}, the job key from {}", server->port(),
               options.listen_address, getuid(), options.ssh_dir);
  return server->run();
}

}  // namespace

}  // namespace tmpi::nodessh

int main(int argc, char** argv) {
  // Whatever descriptors its starter left open (not close-on-exec) are closed first: a session
  // process's sandbox refuses new sockets and files, not the use of one it inherited.
  close_range(3, ~0U, 0);
  return tmpi::cli::run("mpi-sshd", argc, argv, tmpi::nodessh::run);
}
