// See utf8.h.
#include "common/utf8.h"

namespace tmpi {

std::size_t utf8_sequence_at(std::string_view text, std::size_t at) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  if (at >= text.size()) return 0;
  unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong three-byte forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // no overlong four-byte forms
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or F5-FF
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  }
  return length;
}

std::string last_utf8(std::string_view text, std::size_t max_bytes, std::string_view ellipsis) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t room = max_bytes > ellipsis.size() ? max_bytes - ellipsis.size() : 0;
  std::size_t start = text.size() - room;
  // A continuation byte (10xxxxxx) cannot start a character: start after the last of them,
  // at most 3, past which the bytes are invalid anyway and count one unit each.
  for (int skipped = 0;
       skipped < 3 && start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80;
       ++skipped)
    ++start;
  return std::string(max_bytes >= ellipsis.size() ? ellipsis : std::string_view{}) +
         std::string(text.substr(start));
}

std::string truncate_utf8(std::string_view text, std::size_t max_bytes, std::string_view ellipsis) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t room = max_bytes > ellipsis.size() ? max_bytes - ellipsis.size() : 0;
  std::size_t cut = 0;
  while (cut < room) {
    std::size_t length = utf8_sequence_at(text, cut);
    if (length == 0) length = 1;  // an invalid byte is one unit: it cannot be split
    if (cut + length > room) break;
    cut += length;
  }
  std::string out(text.substr(0, cut));
  if (max_bytes >= ellipsis.size()) out += ellipsis;
  return out;
}

namespace {

// The JSON bytes of the unit at text[at] (a whole character, or one invalid byte), and its length.
std::pair<std::size_t, std::size_t> json_unit_at(std::string_view text, std::size_t at) {
  std::size_t length = utf8_sequence_at(text, at);
  if (length == 0) return {3, 1};  // U+FFFD in place of the byte
  if (length > 1) return {length, length};
  auto byte = static_cast<unsigned char>(text[at]);
  if (byte == '"' || byte == '\\' || byte == '\b' || byte == '\f' || byte == '\n' || byte == '\r' ||
      byte == '\t')
    return {2, 1};
  return {byte < 0x20 ? 6 : 1, 1};
}

}  // namespace

std::size_t json_string_bytes(std::string_view text) {
  std::size_t bytes = 0;
  for (std::size_t at = 0; at < text.size();) {
    auto [cost, length] = json_unit_at(text, at);
    bytes += cost;
    at += length;
  }
  return bytes;
}

std::string truncate_json(std::string_view text, std::size_t max_bytes, std::string_view ellipsis) {
  if (json_string_bytes(text) <= max_bytes) return std::string(text);
  std::size_t ellipsis_bytes = json_string_bytes(ellipsis);
  std::size_t room = max_bytes > ellipsis_bytes ? max_bytes - ellipsis_bytes : 0;
  std::size_t cut = 0, used = 0;
  while (cut < text.size()) {
    auto [cost, length] = json_unit_at(text, cut);
    if (used + cost > room) break;
    used += cost;
    cut += length;
  }
  std::string out(text.substr(0, cut));
  if (max_bytes >= ellipsis_bytes) out += ellipsis;
  return out;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    std::size_t length = utf8_sequence_at(text, at);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++at;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

std::string dump_json(const nlohmann::json& document, int indent) {
  return document.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tmpi
