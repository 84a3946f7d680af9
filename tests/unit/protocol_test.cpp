// The wire protocol of the rendezvous (rendezvous/protocol.h): what a sender signs is what
// the receiver parses back, field for field; the proof covers every field, known or not;
// a body of the wrong shape is a 400 that says what the message needs.
#include "rendezvous/protocol.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"

namespace tmpi::rdv {
namespace {

using nlohmann::json;

const std::string kKey = derive_rendezvous_key("job key for the protocol test");

TEST(Protocol, WhatIsSignedParsesBackFieldForField) {
  Registration sent{"j-node-0-1.j", 8, 4, false, "sshd refused the job key", kVersion, random_nonce()};
  json body = json::parse(signed_body(kKey, sent));
  EXPECT_TRUE(signed_by(kKey, Kind::kRegister, body));
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, body)) << "a proof is for one kind of message";
  EXPECT_FALSE(signed_by(derive_rendezvous_key("another key"), Kind::kRegister, body));
  auto parsed = parse_registration(body);
  ASSERT_TRUE(std::holds_alternative<Registration>(parsed));
  const auto& got = std::get<Registration>(parsed);
  EXPECT_EQ(got.host, sent.host);
  EXPECT_EQ(got.slots, 8);
  EXPECT_EQ(got.gpus, 4);
  EXPECT_FALSE(got.ssh_ready);
  EXPECT_EQ(got.ssh_problem, sent.ssh_problem);
  EXPECT_EQ(got.version, TMPI_VERSION);
  EXPECT_EQ(got.nonce, sent.nonce);

  RankReport report{2,         "j-node-0-0.j", RankEventKind::kExit, 137, 9,
                    0.1 + 0.2, "killed\n",     random_nonce(),       ""};
  json rank = json::parse(signed_body(kKey, report));
  EXPECT_TRUE(signed_by(kKey, Kind::kRank, rank)) << "a double survives the canonical round trip";
  auto back = std::get<RankReport>(parse_rank(rank));
  EXPECT_EQ(back.signal, 9);
  EXPECT_EQ(back.code, 137);
  EXPECT_DOUBLE_EQ(back.seconds, 0.1 + 0.2);
  EXPECT_FALSE(rank.contains("expected")) << "only a misplaced rank names the host it belonged on";

  RankReport wrong{
      3, "j-launcher-0-0", RankEventKind::kMisplaced, 69, 0, 0, "", random_nonce(), "j-node-0-1.j"};
  json misplaced = json::parse(signed_body(kKey, wrong));
  EXPECT_TRUE(signed_by(kKey, Kind::kRank, misplaced));
  auto read_back = std::get<RankReport>(parse_rank(misplaced));
  EXPECT_EQ(read_back.event, RankEventKind::kMisplaced);
  EXPECT_EQ(read_back.expected, "j-node-0-1.j");
  misplaced["expected"] = 7;
  EXPECT_TRUE(std::holds_alternative<Refusal>(parse_rank(misplaced))) << "expected is a string";
  misplaced["expected"] = "x";
  misplaced["event"] = "moved";
  EXPECT_TRUE(std::holds_alternative<Refusal>(parse_rank(misplaced)))
      << "no event but start, exit, misplaced";

  auto beat = std::get<Beat>(parse_beat(json::parse(signed_body(kKey, Beat{"h.j", 42}))));
  EXPECT_EQ(beat.seq, 42);

  json rank_beat = json::parse(signed_body(kKey, RankBeat{5, "j-node-0-1", 7}));
  EXPECT_TRUE(signed_by(kKey, Kind::kRankBeat, rank_beat));
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, rank_beat)) << "a rank's beat is no sidecar's beat";
  auto agent = std::get<RankBeat>(parse_rank_beat(rank_beat));
  EXPECT_EQ(agent.rank, 5);
  EXPECT_EQ(agent.host, "j-node-0-1");
  EXPECT_EQ(agent.seq, 7);
}

TEST(Protocol, TheProofCoversEveryFieldAndNoMore) {
  json body = json::parse(signed_body(kKey, Beat{"h.j", 1}));
  json reordered =
      json::parse(R"({"seq": 1, "proof": ")" + body["proof"].get<std::string>() + R"(", "host": "h.j"})");
  EXPECT_TRUE(signed_by(kKey, Kind::kBeat, reordered)) << "key order and spacing are not part of the message";
  json added = body;
  added["note"] = "hello";
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, added)) << "a field the receiver does not know is still signed";
  json dropped =
      json::parse(signed_body(kKey, RankReport{0, "h.j", RankEventKind::kExit, 1, 0, 0, "tail", "n1", ""}));
  dropped.erase("tail");
  EXPECT_FALSE(signed_by(kKey, Kind::kRank, dropped));
  json no_proof = body;
  no_proof.erase("proof");
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, no_proof));
  no_proof["proof"] = 7;
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, no_proof));
  EXPECT_FALSE(signed_by(kKey, Kind::kBeat, json::array()));
}

TEST(Protocol, InvalidUtf8IsSignedAsItIsSent) {
  // A rank's stderr tail may hold any bytes; the sender replaces invalid ones when it
  // serialises, and the receiver checks the proof over what arrived.
  RankReport report{0, "h.j", RankEventKind::kExit, 1, 0, 0, std::string("bad \xff\xfe bytes"), "n2", ""};
  std::string text = signed_body(kKey, report);
  json body = json::parse(text);
  EXPECT_TRUE(signed_by(kKey, Kind::kRank, body));
  EXPECT_NE(std::get<RankReport>(parse_rank(body)).tail.find("\xef\xbf\xbd"), std::string::npos);
}

TEST(Protocol, WrongShapesAreRefusalsThatNameWhatIsNeeded) {
  auto refusal = [](const auto& parsed) {
    const auto* r = std::get_if<Refusal>(&parsed);
    return r != nullptr ? r->status : 0;
  };
  EXPECT_EQ(refusal(parse_registration(
                json::parse(R"({"host":"h","slots":"8","gpus":0,"sshReady":true,"nonce":"n"})"))),
            400);
  EXPECT_EQ(refusal(parse_registration(
                json::parse(R"({"host":"h","slots":8,"gpus":0,"sshReady":true,"nonce":""})"))),
            400);
  EXPECT_EQ(refusal(parse_registration(
                json::parse(R"({"host":"h","slots":8,"gpus":0,"sshReady":true,"nonce":"n","version":1})"))),
            400);
  EXPECT_EQ(refusal(parse_registration(
                json::parse(R"({"host":"h","slots":8,"gpus":0,"sshReady":true,"nonce":"n"})"))),
            0);
  EXPECT_EQ(refusal(parse_registration(
                json::parse(R"({"host":"h","slots":99999999999,"gpus":0,"sshReady":true,"nonce":"n"})"))),
            400)
      << "out of an int's range";
  EXPECT_EQ(refusal(parse_beat(json::parse(R"({"host":"h","seq":1.5})"))), 400);
  EXPECT_EQ(refusal(parse_beat(json::parse(R"("beat")"))), 400);
  EXPECT_EQ(refusal(parse_end(json::parse(R"({"nonce":null})"))), 400);
  auto rank = parse_rank(json::parse(R"({"rank":0,"event":"exit","nonce":"n","seconds":"long"})"));
  ASSERT_EQ(refusal(rank), 400);
  EXPECT_NE(std::get<Refusal>(rank).why.find("seconds a number"), std::string::npos);
}

// Anyone can reach the port: a deep body (here 32,000 levels, 64 KiB) is refused before the
// proof copies and dumps it, which would take the coordinator thread's stack.
TEST(Protocol, ADeepBodyIsDiscardedBeforeAnyProof) {
  std::string deep = R"({"event":"start","nonce":"n","rank":0,"x":)" + std::string(32000, '[') +
                     std::string(32000, ']') + "}";
  EXPECT_TRUE(parse_body(deep).is_discarded());
  EXPECT_FALSE(parse_body(R"({"a":[[[[[[[1]]]]]]]})").is_discarded()) << "8 levels are allowed";
  EXPECT_TRUE(parse_body(R"({"a":[[[[[[[[1]]]]]]]]})").is_discarded()) << "9 are not";
  // Brackets inside strings are text, and an escaped quote does not end a string.
  json text = parse_body(R"({"tail":"[[[[[[[[[[[[ \" {{{{{{{{{{{{","host":"a"})");
  ASSERT_TRUE(text.is_object());
  EXPECT_EQ(text["host"], "a");
  EXPECT_TRUE(parse_body("{not json").is_discarded());
  EXPECT_TRUE(std::holds_alternative<Refusal>(parse_rank(parse_body(deep))));
}

}  // namespace
}  // namespace tmpi::rdv
