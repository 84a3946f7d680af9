// The protocol between a connection's monitor and its session process
// (nodessh/monitor_protocol.h): every message survives its encoding in any cuts of the stream,
// each side takes only what the other may send, and every bound holds.
#include <gtest/gtest.h>

#include "nodessh/monitor_protocol.h"

namespace tmpi::nodessh {
namespace {

std::vector<MonitorMessage> monitor_test_decode(MonitorDecoder::Side side, const std::string& stream,
                                                std::size_t cut) {
  MonitorDecoder decoder(side);
  std::vector<MonitorMessage> out;
  for (std::size_t at = 0; at < stream.size(); at += cut) {
    EXPECT_TRUE(decoder.feed(std::string_view(stream).substr(at, cut)));
    while (auto next = decoder.next()) out.push_back(std::move(*next));
  }
  return out;
}

TEST(NodeSshMonitor, RequestsSurviveAnyCut) {
  StartRequest start;
  start.channel = 7;
  start.command.argv = {"/bin/sh", "-c", std::string("echo \0x", 8)};
  start.command.env = {{"LANG", "C.UTF-8"}, {"SSH_CLIENT", "10.0.0.5 5000 2222"}};
  start.command.pty = true;
  start.size = TerminalSize{132, 43, 1, 2};
  std::string stream = encode_monitor_message(start) + encode_monitor_message(SignalRequest{4242, 15}) +
                       encode_monitor_message(LoginRequest{std::string("\0blob", 5), "sig"});
  for (std::size_t cut : {std::size_t{1}, std::size_t{3}, std::size_t{4096}}) {
    auto messages = monitor_test_decode(MonitorDecoder::Side::kMonitor, stream, cut);
    ASSERT_EQ(messages.size(), 3U);
    EXPECT_EQ(std::get<LoginRequest>(messages[2]).signed_blob, std::string("\0blob", 5));
    EXPECT_EQ(std::get<LoginRequest>(messages[2]).signature, "sig");
    const auto& got = std::get<StartRequest>(messages[0]);
    EXPECT_EQ(got.channel, 7U);
    EXPECT_EQ(got.command.argv, start.command.argv);
    EXPECT_EQ(got.command.env, start.command.env);
    EXPECT_TRUE(got.command.pty);
    EXPECT_EQ(got.size.columns, 132);
    EXPECT_EQ(got.size.height_px, 2);
    EXPECT_EQ(std::get<SignalRequest>(messages[1]).pid, 4242);
    EXPECT_EQ(std::get<SignalRequest>(messages[1]).signal, 15);
  }
}

TEST(NodeSshMonitor, AnswersSurviveAnyCut) {
  std::string stream = encode_monitor_message(Started{3, 100, false}) +
                       encode_monitor_message(StartFailed{4, "cannot fork the command: no memory"}) +
                       encode_monitor_message(Exited{100, 9}) + encode_monitor_message(GroupGone{100}) +
                       encode_monitor_message(LoginVerdict{false, "the signature is not the job key's"});
  auto messages = monitor_test_decode(MonitorDecoder::Side::kSession, stream, 5);
  ASSERT_EQ(messages.size(), 5U);
  EXPECT_FALSE(std::get<LoginVerdict>(messages[4]).accepted);
  EXPECT_EQ(std::get<LoginVerdict>(messages[4]).reason, "the signature is not the job key's");
  EXPECT_EQ(std::get<Started>(messages[0]).pid, 100);
  EXPECT_EQ(std::get<StartFailed>(messages[1]).message, "cannot fork the command: no memory");
  EXPECT_EQ(std::get<Exited>(messages[2]).status, 9);
  EXPECT_EQ(std::get<GroupGone>(messages[3]).pid, 100);
}

TEST(NodeSshMonitor, EachSideRefusesWhatOnlyItMaySend) {
  // A session process that claims a command started, or a monitor that asks for one, is broken.
  MonitorDecoder monitor(MonitorDecoder::Side::kMonitor);
  EXPECT_FALSE(monitor.feed(encode_monitor_message(Exited{1, 0})));
  EXPECT_FALSE(monitor.feed(encode_monitor_message(SignalRequest{1, 9})));  // failed for good
  MonitorDecoder session(MonitorDecoder::Side::kSession);
  EXPECT_FALSE(session.feed(encode_monitor_message(SignalRequest{1, 9})));
  EXPECT_FALSE(
      MonitorDecoder(MonitorDecoder::Side::kSession).feed(encode_monitor_message(LoginRequest{"b", "s"})));
  EXPECT_FALSE(
      MonitorDecoder(MonitorDecoder::Side::kMonitor).feed(encode_monitor_message(LoginVerdict{true, ""})));
}

TEST(NodeSshMonitor, BoundsHold) {
  std::string oversized = "\x7f\xff\xff\xff";  // a frame of 2 GiB announced
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kMonitor).feed(oversized));
  StartRequest many;
  many.command.argv.assign(kMaxMonitorArgs + 1, "x");
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kMonitor).feed(encode_monitor_message(many)));
  StartRequest long_arg;
  long_arg.command.argv = {std::string(kMaxMonitorString + 1, 'a')};
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kMonitor).feed(encode_monitor_message(long_arg)));
  // A field that overruns its frame, and trailing bytes after the fields.
  std::string frame = encode_monitor_message(GroupGone{5});
  std::string short_frame = frame;
  short_frame[3] = static_cast<char>(short_frame[3] - 1);
  short_frame.pop_back();
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kSession).feed(short_frame));
  std::string long_frame = frame + "z";
  long_frame[3] = static_cast<char>(long_frame[3] + 1);
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kSession).feed(long_frame));
  // A flag is 0 or 1: any other byte would decode to a message that encodes differently.
  std::string two_flag = encode_monitor_message(Started{1, 2, true});
  two_flag.back() = 2;
  EXPECT_FALSE(MonitorDecoder(MonitorDecoder::Side::kSession).feed(two_flag));
  // The largest command a client may send fits.
  StartRequest largest;
  largest.command.argv = {"/bin/sh", "-c", std::string(256 * 1024, 'c')};
  largest.command.env.assign(66, {"LC_ALL", std::string(32 * 1024, 'v')});
  EXPECT_TRUE(MonitorDecoder(MonitorDecoder::Side::kMonitor).feed(encode_monitor_message(largest)));
}

}  // namespace
}  // namespace tmpi::nodessh
