// See protocol.h. Each message has one to_json (what is signed and sent) and one parse
// (what is accepted); the two are the whole of the wire format.
#include "rendezvous/protocol.h"

#include <limits>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/json_read.h"

namespace tmpi::rdv {

namespace {

using nlohmann::json;
using wire::read;

}  // namespace

// The word each kind of message is signed under: a proof for one kind is no proof for another.
const char* kind_word(Kind kind) {
  switch (kind) {
    case Kind::kRegister:
      return "register";
    case Kind::kBeat:
      return "beat";
    case Kind::kEnd:
      return "end";
    case Kind::kRank:
      return "rank";
    case Kind::kLeave:
      return "leave";
    case Kind::kRankBeat:
      return "rank-beat";
    case Kind::kMayStart:
      return "may-start";
    case Kind::kHello:
      return "hello";
  }
  return "?";
}

namespace {

// A field that is empty is left out (protocol.h): the body of a coordinator with no epoch
// (the unit tests') is as it was before epochs.
json& with(json& body, const char* name, const std::string& value) {
  if (!value.empty()) body[name] = value;
  return body;
}

nlohmann::json to_json(const Registration& m) {
  json body = {{"host", m.host},       {"slots", m.slots},        {"gpus", m.gpus},
               {"version", m.version}, {"sshReady", m.ssh_ready}, {"sshProblem", m.ssh_problem},
               {"nonce", m.nonce}};
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const Beat& m) {
  json body = {{"host", m.host}, {"seq", m.seq}};
  with(body, "nonce", m.nonce);
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const RankBeat& m) {
  json body = {{"rank", m.rank}, {"host", m.host}, {"seq", m.seq}};
  with(body, "nonce", m.nonce);
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const MayStart& m) {
  json body = {{"rank", m.rank}, {"host", m.host}};
  with(body, "nonce", m.nonce);
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const Leave& m) {
  json body = {{"host", m.host}, {"nonce", m.nonce}};
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const EndJob& m) {
  json body = {{"nonce", m.nonce}};
  return with(body, "epoch", m.epoch);
}
nlohmann::json to_json(const Hello& m) {
  return {{"nonce", m.nonce}};
}
nlohmann::json to_json(const RankReport& m) {
  nlohmann::json body = {
      {"rank", m.rank}, {"host", m.host},     {"event", choice_name(m.event, kRankEventKindSpellings)},
      {"code", m.code}, {"signal", m.signal}, {"seconds", m.seconds},
      {"tail", m.tail}, {"nonce", m.nonce}};
  with(body, "expected", m.expected);
  if (m.oom_killed) body["oomKilled"] = true;
  if (m.oom_counted) body["oomCounted"] = true;
  if (m.memory_limit > 0) body["memoryLimit"] = m.memory_limit;
  if (m.left_processes) body["leftProcesses"] = true;
  return with(body, "epoch", m.epoch);
}

// The proof of a body's fields, whatever "proof" it carries.
std::string proof_of(std::string_view key, Kind kind, json body) {
  body.erase(kProofField);
  return hmac_hex(key, std::string(kind_word(kind)) + "|" + dump_json(body));
}

std::string sign(std::string_view key, Kind kind, json body) {
  body[kProofField] = proof_of(key, kind, body);
  return dump_json(body);
}

}  // namespace

json parse_body(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {  // brackets inside strings are text; an escaped quote ends nothing
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxBodyDepth) return json(json::value_t::discarded);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return json::parse(body, nullptr, false);
}

std::string signed_body(std::string_view key, const Registration& message) {
  return sign(key, Kind::kRegister, to_json(message));
}
std::string signed_body(std::string_view key, const Beat& message) {
  return sign(key, Kind::kBeat, to_json(message));
}
std::string signed_body(std::string_view key, const EndJob& message) {
  return sign(key, Kind::kEnd, to_json(message));
}
std::string signed_body(std::string_view key, const RankReport& message) {
  return sign(key, Kind::kRank, to_json(message));
}

std::string signed_body(std::string_view key, const Leave& message) {
  return sign(key, Kind::kLeave, to_json(message));
}

std::string signed_body(std::string_view key, const RankBeat& message) {
  return sign(key, Kind::kRankBeat, to_json(message));
}

Parsed<RankBeat> parse_rank_beat(const json& body) {
  RankBeat m;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "nonce", m.nonce, false) ||
      !read(body, "rank", m.rank, true) || !read(body, "host", m.host, true) ||
      !read(body, "seq", m.seq, true) || m.rank < 0 || m.host.empty()) {
    return Refusal{400,
                   "a rank's beat needs rank (integer, 0 or more), host (string), seq (integer) and proof"};
  }
  return m;
}

std::string signed_body(std::string_view key, const MayStart& message) {
  return sign(key, Kind::kMayStart, to_json(message));
}

std::string signed_body(std::string_view key, const Hello& message) {
  return sign(key, Kind::kHello, to_json(message));
}

Parsed<Hello> parse_hello(const json& body) {
  Hello m;
  if (!body.is_object() || !read(body, "nonce", m.nonce, true) || m.nonce.empty()) {
    return Refusal{400, "a challenge needs a nonce (string) and a proof"};
  }
  return m;
}

Parsed<MayStart> parse_may_start(const json& body) {
  MayStart m;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "nonce", m.nonce, false) ||
      !read(body, "rank", m.rank, true) || !read(body, "host", m.host, true) || m.rank < 0 ||
      m.host.empty()) {
    return Refusal{400, "asking to start a rank needs rank (integer, 0 or more), host (string) and proof"};
  }
  return m;
}

Parsed<Leave> parse_leave(const json& body) {
  Leave m;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "host", m.host, true) ||
      !read(body, "nonce", m.nonce, true) || m.nonce.empty()) {
    return Refusal{400, "leaving needs host, nonce (strings) and proof"};
  }
  return m;
}

Parsed<Registration> parse_registration(const json& body) {
  Registration m;
  m.version.clear();
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "host", m.host, true) ||
      !read(body, "slots", m.slots, true) || !read(body, "gpus", m.gpus, true) ||
      !read(body, "sshReady", m.ssh_ready, true) || !read(body, "nonce", m.nonce, true) ||
      !read(body, "sshProblem", m.ssh_problem, false) || !read(body, "version", m.version, false) ||
      m.nonce.empty()) {
    return Refusal{400,
                   "a registration needs host, nonce (strings), slots, gpus (integers) and sshReady "
                   "(boolean); sshProblem and version are strings"};
  }
  return m;
}

Parsed<Beat> parse_beat(const json& body) {
  Beat m;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "nonce", m.nonce, false) ||
      !read(body, "host", m.host, true) || !read(body, "seq", m.seq, true)) {
    return Refusal{400, "a beat needs host (string), seq (integer) and proof"};
  }
  return m;
}

Parsed<EndJob> parse_end(const json& body) {
  EndJob m;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "nonce", m.nonce, true) ||
      m.nonce.empty()) {
    return Refusal{400, "ending the job needs a nonce (string) and a proof"};
  }
  return m;
}

Parsed<RankReport> parse_rank(const json& body) {
  RankReport m;
  std::string event;
  if (!body.is_object() || !read(body, "epoch", m.epoch, false) || !read(body, "rank", m.rank, true) ||
      !read(body, "event", event, true) || !read(body, "nonce", m.nonce, true) ||
      !read(body, "host", m.host, false) || !read(body, "code", m.code, false) ||
      !read(body, "signal", m.signal, false) || !read(body, "seconds", m.seconds, false) ||
      !read(body, "tail", m.tail, false) || !read(body, "expected", m.expected, false) ||
      !read(body, "oomKilled", m.oom_killed, false) || !read(body, "oomCounted", m.oom_counted, false) ||
      !read(body, "memoryLimit", m.memory_limit, false) || m.memory_limit < 0 ||
      !read(body, "leftProcesses", m.left_processes, false) || m.nonce.empty() ||
      !choice_value(event, kRankEventKindSpellings)) {
    return Refusal{400,
                   "a rank report needs rank (integer), event (\"start\", \"exit\" or \"misplaced\"), nonce "
                   "and proof; host, tail and expected are strings, code and signal integers, seconds a "
                   "number, oomKilled, oomCounted and leftProcesses booleans, memoryLimit a count of bytes"};
  }
  m.event = *choice_value(event, kRankEventKindSpellings);
  return m;
}

bool signed_by(std::string_view key, Kind kind, const json& body) {
  auto it = body.find(kProofField);
  if (!body.is_object() || it == body.end() || !it->is_string()) return false;
  return proof_matches(proof_of(key, kind, body), it->get<std::string>());
}

}  // namespace tmpi::rdv
