// Logging: spdlog with one formatter of our own, which (1) writes plain lines by default
// or JSON lines on request (--log-format json), and (2) redacts secrets from every line,
// whatever the call site passed: PEM private key blocks and bearer tokens never reach a log.
// Code logs with the plain spdlog calls (spdlog::info(...)).
#pragma once

#include "common/error.h"
#include "common/params.h"

#include <string>
#include <string_view>

namespace tmpi::log {

// Installs the stderr logger for `program` ("mpi-init") at `level` in `format`.
Status setup(std::string_view program, std::string_view level, std::string_view format);

// setup() from the registry's log-level and log-format, then one debug line per
// setting that the environment supplied.
Status setup_from(std::string_view program, const Params& params);

// Returns text with private keys and bearer tokens replaced by "[redacted]".
std::string redact(std::string_view text);

}  // namespace tmpi::log
