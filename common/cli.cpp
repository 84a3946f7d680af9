// See cli.h. The error goes through the logger when one is set up (so it is redacted and,
// with --log-format json, machine-readable); before that, straight to stderr.
#include "common/cli.h"

#include <exception>
#include <iostream>

#include <spdlog/spdlog.h>

#include "common/asan_options.h"  // every program links this file (main calls cli::run)
#include "common/log.h"
#include "common/params.h"

namespace tmpi::cli {

int run(std::string_view program, int argc, char** argv, const Main& body) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--params-markdown") {  // regenerates the README's table
    std::cout << markdown_table();
    return 0;
  }
  if (args.size() == 1 && args[0] == "--version") {  // the project's version, as the rendezvous sends it
    std::cout << program << " " << TMPI_VERSION << "\n";
    return 0;
  }
  if (args.size() == 1 && args[0] == "--exit-codes-markdown") {  // and its exit-code table
    std::cout << exit_codes_markdown();
    return 0;
  }
  Error error;
  try {
    auto status = body(args);
    if (status) return 0;
    error = status.error();
  } catch (const std::exception& e) {
    error = Error{Exit::kSoftware, fmt::format("internal error: {}", e.what())};
  }
  if (error.message.empty()) return static_cast<int>(error.exit);  // said already (another rank, a table)
  if (spdlog::default_logger_raw() != nullptr && spdlog::default_logger_raw()->name() == program) {
    spdlog::error("{}", error.message);
  } else {
    std::cerr << program << ": " << log::redact(error.message) << "\n";
  }
  return static_cast<int>(error.exit);
}

}  // namespace tmpi::cli
