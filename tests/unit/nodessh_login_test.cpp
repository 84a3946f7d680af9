// The monitor's own check of a login (nodessh/login_proof.h): a real Ed25519 signature by the
// job key over a userauth request is taken once; a forged one, one over a request that names
// another key, service or method, or a session id already taken, is refused.
#include <sodium.h>

#include <array>

#include <gtest/gtest.h>

#include "nodessh/login_proof.h"

namespace tmpi::nodessh {
namespace {

std::string login_test_string(std::string_view bytes) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((bytes.size() >> shift) & 0xff);
  return out += bytes;
}

struct LoginTestKey {
  std::array<unsigned char, crypto_sign_PUBLICKEYBYTES> public_key{};
  std::array<unsigned char, crypto_sign_SECRETKEYBYTES> secret_key{};
  LoginTestKey() {
    EXPECT_GE(sodium_init(), 0);
    crypto_sign_keypair(public_key.data(), secret_key.data());
  }
  std::string blob() const {
    return login_test_string("ssh-ed25519") +
           login_test_string({reinterpret_cast<const char*>(public_key.data()), public_key.size()});
  }
  std::string sign(const std::string& message) const {
    std::string signature(crypto_sign_BYTES, '\0');
    crypto_sign_detached(reinterpret_cast<unsigned char*>(signature.data()), nullptr,
                         reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                         secret_key.data());
    return signature;
  }
};

// What libssh's ssh_msg_userauth_build_digest builds (src/messages.c).
std::string login_test_request(const std::string& session_id, const std::string& key_blob,
                               const std::string& service = "ssh-connection",
                               const std::string& user = "mpiuser") {
  return login_test_string(session_id) + '\x32' + login_test_string(user) + login_test_string(service) +
         login_test_string("publickey") + '\x01' + login_test_string("ssh-ed25519") +
         login_test_string(key_blob);
}

TEST(NodeSshLogin, TakesTheJobKeysRealSignatureOnce) {
  LoginTestKey job;
  auto verifier = LoginVerifier::for_job_key(job.blob());
  ASSERT_TRUE(verifier) << verifier.error().message;
  const std::string request = login_test_request(std::string(32, 's'), job.blob());
  auto user = verifier->check(request, job.sign(request));
  ASSERT_TRUE(user) << user.error().message;
  EXPECT_EQ(*user, "mpiuser");
  auto again = verifier->check(request, job.sign(request));
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("session id already"), std::string::npos);
}

TEST(NodeSshLogin, RefusesAForgedSignature) {
  LoginTestKey job;
  LoginTestKey stranger;
  auto verifier = LoginVerifier::for_job_key(job.blob());
  ASSERT_TRUE(verifier);
  const std::string request = login_test_request(std::string(32, 'f'), job.blob());
  EXPECT_FALSE(verifier->check(request, stranger.sign(request)));  // the right bytes, another signer
  std::string flipped = job.sign(request);
  flipped[5] = static_cast<char>(flipped[5] ^ 1);
  EXPECT_FALSE(verifier->check(request, flipped));
  EXPECT_FALSE(verifier->check(request, ""));
  // A real signature over other bytes than those presented.
  EXPECT_FALSE(verifier->check(request, job.sign(login_test_request(std::string(32, 'g'), job.blob()))));
}

TEST(NodeSshLogin, RefusesAnotherKeyServiceOrShape) {
  LoginTestKey job;
  LoginTestKey stranger;
  auto verifier = LoginVerifier::for_job_key(job.blob());
  ASSERT_TRUE(verifier);
  // Signed by the stranger for the stranger's key: libssh would take it as "valid".
  const std::string other_key = login_test_request(std::string(32, 'k'), stranger.blob());
  auto refused = verifier->check(other_key, stranger.sign(other_key));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("another key"), std::string::npos);
  const std::string other_service = login_test_request(std::string(32, 'v'), job.blob(), "ssh-userauth");
  EXPECT_FALSE(verifier->check(other_service, job.sign(other_service)));
  const std::string trailing = login_test_request(std::string(32, 't'), job.blob()) + "x";
  EXPECT_FALSE(verifier->check(trailing, job.sign(trailing)));
  const std::string no_session = login_test_request("", job.blob());
  EXPECT_FALSE(verifier->check(no_session, job.sign(no_session)));
}

TEST(NodeSshLogin, AJobKeyOfAnUnknownTypeVerifiesNothing) {
  EXPECT_FALSE(LoginVerifier::for_job_key(login_test_string("ssh-dss") + login_test_string("x")));
  EXPECT_FALSE(LoginVerifier::for_job_key(""));
}

}  // namespace
}  // namespace tmpi::nodessh
