// The edge of every binary: main() calls cli::run, which turns an Error (or an escaped
// exception) into one clear line on stderr and the documented exit code. An Error with an
// empty message exits with its code and prints nothing: it was reported already.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

namespace tmpi::cli {

using Main = std::function<Status(const std::vector<std::string>& args)>;

// Runs body(argv[1..]); returns the process exit code. `--version` alone prints the
// program's name and the project's version (TMPI_VERSION) and exits 0, in every program.
int run(std::string_view program, int argc, char** argv, const Main& body);

}  // namespace tmpi::cli
