// Where the job's private key lives in an ssh folder. mpi-init writes it there under
// OpenSSH's name for its type; the sidecar, the coordinator, the launcher and the rank
// agent all read it back from there.
#pragma once

#include <initializer_list>
#include <string>

#include "common/error.h"

namespace tmpi {

struct KeyFile {
  std::string path;
  std::string text;  // the private key; never logged
};

// The first of `names` that exists in `dir`, read; an Error that names the folder if none.
Expected<KeyFile> find_key_file(const std::string& dir, std::initializer_list<const char*> names,
                                std::string_view hint);

// id_ed25519, id_ecdsa or id_rsa in ssh_dir.
Expected<KeyFile> find_job_key(const std::string& ssh_dir);

}  // namespace tmpi
