// See job_key.h.
#include "common/job_key.h"

#include "common/files.h"

namespace tmpi {

Expected<KeyFile> find_key_file(const std::string& dir, std::initializer_list<const char*> names,
                                std::string_view hint, Exit missing) {
  for (const char* name : names) {
    std::string path = dir + "/" + name;
    if (!file_exists(path)) continue;
    TMPI_ASSIGN(std::string text, read_file(path, 64 * 1024));
    return KeyFile{path, std::move(text)};
  }
  return make_error(missing, "no job key in {}; {}", dir, hint);
}

Expected<KeyFile> find_job_key(const std::string& ssh_dir) {
  return find_key_file(ssh_dir, {"id_ed25519", "id_ecdsa", "id_rsa"},
                       "run mpi-init (or `mpi-init --role node` in a node pod) first, or pass --ssh-dir",
                       Exit::kUsage);
}

}  // namespace tmpi
