// libFuzzer target: the log formatter, which every message passes, whatever text it holds
// (host names from requests, pod fields, a rank's stderr). For any input: no crash, and the
// guarantees of common/log.h hold.
//   redact():    no PEM private key label and no bearer token is left; redacting again
//                changes nothing.
//   printable(): valid UTF-8; no control character but a tab or a line break; each line
//                break followed by the continuation mark, so no line can pass for a record;
//                the length bounded by the message limit (each byte at most 4 when escaped).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/utf8.h"

namespace {

bool token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("._~+/=-").find(c) != std::string_view::npos;
}

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// A bearer token left in `text`: "[Bb]earer", white space, a token character.
bool bearer_left(std::string_view text) {
  for (std::size_t at = text.find("earer", 1); at != std::string_view::npos;
       at = text.find("earer", at + 1)) {
    if (text[at - 1] != 'B' && text[at - 1] != 'b') continue;
    std::size_t i = at + 5;
    while (i < text.size() && space(text[i])) ++i;
    if (i > at + 5 && i < text.size() && token_char(text[i])) return true;
  }
  return false;
}

// A private key's BEGIN label left in `text`.
bool key_left(std::string_view text) {
  for (std::size_t at = text.find("-----BEGIN "); at != std::string_view::npos;
       at = text.find("-----BEGIN ", at + 1)) {
    for (std::size_t i = at + 11; i < text.size(); ++i) {
      if (text.compare(i, 16, "PRIVATE KEY-----") == 0) return true;
      char c = text[i];
      if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ')) break;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string redacted = tmpi::log::redact(text);
  if (bearer_left(redacted) || key_left(redacted)) std::abort();
  if (tmpi::log::redact(redacted) != redacted) std::abort();

  std::string shown = tmpi::log::printable(text);
  if (tmpi::valid_utf8(shown) != shown) std::abort();
  std::string_view continuation = tmpi::log::kContinuation;
  for (std::size_t i = 0; i < shown.size(); ++i) {
    auto c = static_cast<unsigned char>(shown[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) std::abort();
    if (c == '\n' && shown.compare(i + 1, continuation.size(), continuation) != 0) std::abort();
  }
  if (shown.size() > 4 * tmpi::log::kMaxMessageBytes + 64) std::abort();
  return 0;
}
