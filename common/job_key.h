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

// The first of `names` that exists in `dir`, read; if none, an Error with exit `missing`
// (usage for a folder the user named, bad input for a mounted Secret) that names the folder.
Expected<KeyFile> find_key_file(const std::string& dir, std::initializer_list<const char*> names,
                                std::string_view hint, Exit missing);

// id_ed25519, id_ecdsa or id_rsa in ssh_dir.
Expected<KeyFile> find_job_key(const std::string& ssh_dir);

}  // namespace tmpi
