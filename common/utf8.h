// UTF-8 safety for text that came from outside (a command line, a rank's stderr, a pod
// field, a server's reply) on its way into JSON, a log or a Kubernetes object.
//
// nlohmann::json throws on invalid UTF-8 when it serialises, and a byte-wise cut can end in
// the middle of a character and make valid text invalid; either one, on a reporter's thread,
// terminated the process. So every cut goes through truncate_utf8(), and every dump() of a
// document that holds outside text uses dump_json(), which replaces invalid bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tmpi {

// The length (1-4) of the well-formed UTF-8 sequence at text[at] (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 if the bytes there are not one.
std::size_t utf8_sequence_at(std::string_view text, std::size_t at);

// The longest prefix of `text` of at most `max_bytes` that does not split a character;
// with `ellipsis` ("..."), a cut prefix ends with it, within the same `max_bytes`.
std::string truncate_utf8(std::string_view text, std::size_t max_bytes, std::string_view ellipsis = {});
// The same from the other end: the longest suffix of at most `max_bytes` that does not begin
// inside a character (what a long output ends with: its error); `ellipsis` leads a cut one.
std::string last_utf8(std::string_view text, std::size_t max_bytes, std::string_view ellipsis = {});

// The bytes `text` takes inside a JSON string as dump_json writes it: `"` `\` and the
// control characters escaped (\n is 2 bytes, \u001b is 6), an invalid byte as U+FFFD (3).
std::size_t json_string_bytes(std::string_view text);

// truncate_utf8 by that measure: the longest prefix whose JSON form fits in `max_bytes`,
// with the ellipsis within the bound. A byte bound on the raw text is not one on the body
// that carries it: 1 KiB of escape bytes is 6 KiB of JSON.
std::string truncate_json(std::string_view text, std::size_t max_bytes, std::string_view ellipsis = {});

// `text` with every byte that is not part of a well-formed sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

// json.dump() that never throws: invalid UTF-8 in any string becomes U+FFFD.
std::string dump_json(const nlohmann::json& document, int indent = -1);

}  // namespace tmpi
