// See monitor_protocol.h. A writer appends fields; a reader takes them from one frame, each
// read checked against what is left of it and against its bound.
#include "nodessh/monitor_protocol.h"

namespace tmpi::nodessh {

namespace {

enum Kind : std::uint8_t {
  kStart = 1,
  kSignal,
  kStarted,
  kStartFailed,
  kExited,
  kGroupGone,
  kLogin,
  kLoginVerdict
};

struct Writer {
  std::string out;
  void u8(std::uint8_t value) { out += static_cast<char>(value); }
  void u32(std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
  }
  void i32(std::int32_t value) { u32(static_cast<std::uint32_t>(value)); }
  void str(std::string_view text) {
    u32(static_cast<std::uint32_t>(text.size()));
    out += text;
  }
};

struct Reader {
  std::string_view in;
  bool ok = true;
  std::uint8_t u8() {
    if (in.empty()) return fail(), 0;
    auto value = static_cast<std::uint8_t>(in[0]);
    in.remove_prefix(1);
    return value;
  }
  std::uint32_t u32() {
    if (in.size() < 4) return fail(), 0;
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i)
      value = value << 8 | static_cast<std::uint8_t>(in[static_cast<std::size_t>(i)]);
    in.remove_prefix(4);
    return value;
  }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  bool flag() {  // a byte of 0 or 1, nothing else: one encoding for each message
    std::uint8_t value = u8();
    if (value > 1) fail();
    return value == 1;
  }
  std::string str() {
    std::uint32_t size = u32();
    if (!ok || size > in.size() || size > kMaxMonitorString) return fail(), "";
    std::string value(in.substr(0, size));
    in.remove_prefix(size);
    return value;
  }
  void fail() { ok = false; }
};

struct Encode {
  Writer& w;
  void operator()(const StartRequest& m) const {
    w.u8(kStart);
    w.u32(m.channel);
    w.u32(static_cast<std::uint32_t>(m.command.argv.size()));
    for (const auto& arg : m.command.argv) w.str(arg);
    w.u32(static_cast<std::uint32_t>(m.command.env.size()));
    for (const auto& [name, value] : m.command.env) w.str(name), w.str(value);
    w.u8(m.command.pty ? 1 : 0);
    for (int v : {m.size.columns, m.size.rows, m.size.width_px, m.size.height_px}) w.i32(v);
  }
  void operator()(const SignalRequest& m) const { w.u8(kSignal), w.i32(m.pid), w.i32(m.signal); }
  void operator()(const Started& m) const {
    w.u8(kStarted), w.u32(m.channel), w.i32(m.pid), w.u8(m.pty ? 1 : 0);
  }
  void operator()(const StartFailed& m) const { w.u8(kStartFailed), w.u32(m.channel), w.str(m.message); }
  void operator()(const Exited& m) const { w.u8(kExited), w.i32(m.pid), w.i32(m.status); }
  void operator()(const GroupGone& m) const { w.u8(kGroupGone), w.i32(m.pid); }
  void operator()(const LoginRequest& m) const { w.u8(kLogin), w.str(m.signed_blob), w.str(m.signature); }
  void operator()(const LoginVerdict& m) const {
    w.u8(kLoginVerdict), w.u8(m.accepted ? 1 : 0), w.str(m.reason);
  }
};

std::optional<MonitorMessage> decode_request(std::uint8_t kind, Reader& r) {
  if (kind == kSignal) {
    SignalRequest m;
    m.pid = r.i32();
    m.signal = r.i32();
    return m;
  }
  if (kind == kLogin) {
    LoginRequest m;
    m.signed_blob = r.str();
    m.signature = r.str();
    return m;
  }
  if (kind != kStart) return std::nullopt;
  StartRequest m;
  m.channel = r.u32();
  std::uint32_t args = r.u32();
  if (args > kMaxMonitorArgs) return std::nullopt;
  for (std::uint32_t i = 0; i < args && r.ok; ++i) m.command.argv.push_back(r.str());
  std::uint32_t vars = r.u32();
  if (vars > kMaxMonitorEnv) return std::nullopt;
  for (std::uint32_t i = 0; i < vars && r.ok; ++i) {
    std::string name = r.str();
    m.command.env.emplace_back(std::move(name), r.str());
  }
  m.command.pty = r.flag();
  for (int* v : {&m.size.columns, &m.size.rows, &m.size.width_px, &m.size.height_px}) *v = r.i32();
  return m;
}

std::optional<MonitorMessage> decode_answer(std::uint8_t kind, Reader& r) {
  switch (kind) {
    case kStarted: {
      Started m;
      m.channel = r.u32();
      m.pid = r.i32();
      m.pty = r.flag();
      return m;
    }
    case kStartFailed: {
      StartFailed m;
      m.channel = r.u32();
      m.message = r.str();
      return m;
    }
    case kExited: {
      Exited m;
      m.pid = r.i32();
      m.status = r.i32();
      return m;
    }
    case kGroupGone:
      return GroupGone{r.i32()};
    case kLoginVerdict: {
      LoginVerdict m;
      m.accepted = r.flag();
      m.reason = r.str();
      return m;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string encode_monitor_message(const MonitorMessage& message) {
  Writer body;
  std::visit(Encode{body}, message);
  Writer frame;
  frame.u32(static_cast<std::uint32_t>(body.out.size()));
  return frame.out + body.out;
}

Status MonitorDecoder::feed(std::string_view bytes) {
  if (failed_) return make_error(Exit::kData, "the monitor's stream already failed");
  buffer_.append(bytes);
  while (buffer_.size() >= 4) {
    Reader length{buffer_};
    std::uint32_t size = length.u32();
    if (size == 0 || size > kMaxMonitorFrame) {
      failed_ = true;
      return make_error(Exit::kData, "a monitor frame of {} bytes (at most {})", size, kMaxMonitorFrame);
    }
    if (buffer_.size() - 4 < size) break;
    Reader r{std::string_view(buffer_).substr(4, size)};
    std::uint8_t kind = r.u8();
    auto message = side_ == Side::kMonitor ? decode_request(kind, r) : decode_answer(kind, r);
    if (!message || !r.ok || !r.in.empty()) {
      failed_ = true;
      return make_error(Exit::kData, "a malformed monitor message of kind {} ({} bytes)", kind, size);
    }
    ready_.push_back(std::move(*message));
    buffer_.erase(0, 4 + static_cast<std::size_t>(size));
  }
  return ok_status();
}

std::optional<MonitorMessage> MonitorDecoder::next() {
  if (taken_ >= ready_.size()) {
    ready_.clear();
    taken_ = 0;
    return std::nullopt;
  }
  return std::move(ready_[taken_++]);
}

}  // namespace tmpi::nodessh
