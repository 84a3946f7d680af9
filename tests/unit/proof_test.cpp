// Proofs: the HMAC is the standard one (RFC 4231 vectors, a key longer than SHA-256's block
// included: the rendezvous key is derived from a whole private key file), so that any
// peer with the job key can check them, whatever library it uses.
#include "common/proof.h"

#include <set>

#include <gtest/gtest.h>

namespace tmpi {
namespace {

TEST(Proof, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");  // test case 2
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");  // test case 6
}

TEST(Proof, RendezvousKeyIgnoresWhitespaceAndDependsOnTheKey) {
  std::string key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
  std::string same =
      "-----BEGIN OPENSSH PRIVATE KEY-----\r\nb3BlbnNzaC1rZXktdjEAAAAA\r\n-----END OPENSSH PRIVATE KEY-----";
  std::string other =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAB\n-----END OPENSSH PRIVATE KEY-----\n";
  EXPECT_EQ(derive_rendezvous_key(key), derive_rendezvous_key(same));
  EXPECT_NE(derive_rendezvous_key(key), derive_rendezvous_key(other));
  EXPECT_EQ(derive_rendezvous_key(key).size(), 32U);
}

TEST(Proof, MatchingAndNonces) {
  std::string proof = hmac_hex("k", "beat|node-0|7");
  EXPECT_TRUE(proof_matches(proof, proof));
  EXPECT_FALSE(proof_matches(proof, hmac_hex("k", "beat|node-0|8")));
  EXPECT_FALSE(proof_matches(proof, proof.substr(1)));
  std::set<std::string> nonces;
  for (int i = 0; i < 100; ++i) {
    std::string nonce = random_nonce();
    EXPECT_EQ(nonce.size(), 32U);
    EXPECT_EQ(nonce.find_first_not_of("0123456789abcdef"), std::string::npos);
    nonces.insert(nonce);
  }
  EXPECT_EQ(nonces.size(), 100U);
}

}  // namespace
}  // namespace tmpi
