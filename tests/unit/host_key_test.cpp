// The host key derived from the job key (common/host_key.h): the same on every pod that reads
// the same job key, never the job key itself, one libssh serves and OpenSSH's format holds.
#include "common/host_key.h"

#include <memory>

#include <gtest/gtest.h>
#include <libssh/libssh.h>

#include "common/openssh_key.h"

namespace tmpi {
namespace {

std::string host_key_test_job_key() {
  auto text = new_openssh_ed25519_private_key("job");
  EXPECT_TRUE(static_cast<bool>(text));
  return text ? *text : "";
}

struct HostKeyTestKeyFree {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using HostKeyTestKey = std::unique_ptr<std::remove_pointer_t<ssh_key>, HostKeyTestKeyFree>;

HostKeyTestKey host_key_test_import(const std::string& text) {
  ssh_key raw = nullptr;
  EXPECT_EQ(ssh_pki_import_privkey_base64(text.c_str(), nullptr, nullptr, nullptr, &raw), SSH_OK);
  return HostKeyTestKey(raw);
}

std::string host_key_test_public_base64(ssh_key key) {
  ssh_key raw_public = nullptr;
  EXPECT_EQ(ssh_pki_export_privkey_to_pubkey(key, &raw_public), SSH_OK);
  HostKeyTestKey public_key(raw_public);
  char* base64 = nullptr;
  EXPECT_EQ(ssh_pki_export_pubkey_base64(public_key.get(), &base64), SSH_OK);
  std::string out = base64 == nullptr ? "" : base64;
  ssh_string_free_char(base64);
  return out;
}

TEST(HostKey, TheSameJobKeyGivesTheSameHostKeyWhateverItsWhitespace) {
  std::string job = host_key_test_job_key();
  std::string reflowed = job;
  reflowed.pop_back();  // the trailing newline, as a Secret may hold it
  EXPECT_EQ(derive_host_key(job).public_line, derive_host_key(reflowed).public_line);
  EXPECT_EQ(derive_host_key(job).private_key, derive_host_key(job).private_key);
}

TEST(HostKey, IsNotTheJobKeyAndDiffersPerJob) {
  std::string job = host_key_test_job_key();
  HostKey host = derive_host_key(job);
  HostKeyTestKey job_key = host_key_test_import(job);
  HostKeyTestKey host_key = host_key_test_import(host.private_key);
  ASSERT_TRUE(job_key && host_key);
  EXPECT_NE(ssh_key_cmp(job_key.get(), host_key.get(), SSH_KEY_CMP_PUBLIC), 0);
  EXPECT_NE(derive_host_key(host_key_test_job_key()).public_line, host.public_line);
}

TEST(HostKey, LibsshReadsThePrivateHalfAndItsPublicHalfIsTheLine) {
  HostKey host = derive_host_key(host_key_test_job_key());
  HostKeyTestKey key = host_key_test_import(host.private_key);
  ASSERT_TRUE(key);
  EXPECT_EQ(ssh_key_type(key.get()), SSH_KEYTYPE_ED25519);
  EXPECT_EQ(host.public_line,
            "ssh-ed25519 " + host_key_test_public_base64(key.get()) + " trainer-mpi host key");
  EXPECT_EQ(host_key_known_part(host), "ssh-ed25519 " + host_key_test_public_base64(key.get()));
}

TEST(HostKey, AnyJobKeyTypeGivesAnEd25519HostKey) {
  // The derivation reads the job key's text, not its type: Trainer's ECDSA P-521 PEM key too.
  HostKey host =
      derive_host_key("-----BEGIN EC PRIVATE KEY-----\nMIHcAgEBBEIB\n-----END EC PRIVATE KEY-----\n");
  HostKeyTestKey key = host_key_test_import(host.private_key);
  ASSERT_TRUE(key);
  EXPECT_EQ(ssh_key_type(key.get()), SSH_KEYTYPE_ED25519);
}

}  // namespace
}  // namespace tmpi
