// mpi-bundle: the bundle's own tool (docs/design.md, "The bundle").
//   mpi-bundle copy DEST    puts the bundle this program belongs to into DEST, every byte
//                           checked against its MANIFEST, bin/ last (the runtimes' init
//                           container: from trainer-mpi's image into the pods' volume);
//   mpi-bundle verify [DIR] checks a bundle (default: its own) against its MANIFEST.
// Its own bundle is the folder above the bin/ it was started from (common/self_path.h).
#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "bundle/copy.h"
#include "common/cli.h"
#include "common/self_path.h"

namespace {

using tmpi::Exit;
using tmpi::make_error;

constexpr std::string_view kUsage =
    "usage: mpi-bundle copy DEST | mpi-bundle verify [DIR]\n"
    "  copy DEST     put this bundle into DEST (made if missing), checked against its MANIFEST;\n"
    "                bin/ comes last, so a copy cut short has nothing to run\n"
    "  verify [DIR]  check the bundle at DIR (default: this one) against its MANIFEST\n";

std::string own_bundle() {
  return std::filesystem::path(tmpi::self_path()).parent_path().parent_path().string();
}

double megabytes(std::uint64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

tmpi::Status run(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? make_error(Exit::kUsage, "no subcommand (copy or verify)") : tmpi::ok_status();
  }
  auto started = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
        .count();
  };
  if (args[0] == "copy" && args.size() == 2) {
    auto from = own_bundle();
    TMPI_ASSIGN(auto stats, tmpi::bundle::copy_bundle(from, args[1]));
    std::cout << fmt::format(
        "mpi-bundle: copied {} files and {} links ({:.1f} MB) from {} to {} in {} ms, every "
        "file checked against the MANIFEST\n",
        stats.files, stats.links, megabytes(stats.bytes), from, args[1], elapsed_ms());
    return tmpi::ok_status();
  }
  if (args[0] == "verify" && args.size() <= 2) {
    auto dir = args.size() == 2 ? args[1] : own_bundle();
    TMPI_ASSIGN(auto stats, tmpi::bundle::verify_bundle(dir));
    std::cout << fmt::format(
        "mpi-bundle: {} is whole: {} files and {} links ({:.1f} MB) match its MANIFEST ({} ms)\n", dir,
        stats.files, stats.links, megabytes(stats.bytes), elapsed_ms());
    return tmpi::ok_status();
  }
  return make_error(Exit::kUsage, "'{}': wants copy DEST, or verify [DIR] (see --help)",
                    fmt::join(args, " "));
}

}  // namespace

int main(int argc, char** argv) {
  return tmpi::cli::run("mpi-bundle", argc, argv, run);
}
