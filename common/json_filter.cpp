// See json_filter.h. The kept paths become a small trie. The walk visits every value of the
// document in order, as On Demand wants: at each value it holds the trie node of its path
// and the nlohmann node it fills, both null under an unwanted key. A wanted value is built;
// an unwanted one is still read to its end (keys unescaped, strings unescaped, numbers and
// literals parsed) but stored nowhere, so that a syntax error anywhere fails the parse, as
// it did with nlohmann's parser: On Demand's own skipping only counts brackets.
//
// simdjson is used through its error codes only (no exceptions). Its first stage reports
// bad UTF-8, an unclosed string or a control character in one without a position; those
// rare cases are found again by a plain scan of the text, to name the byte.
#include "common/json_filter.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/utf8.h"

namespace tmpi {

namespace {

using nlohmann::json;
namespace od = simdjson::ondemand;
using simdjson::error_code;

static_assert(PaddedText::kPadding >= simdjson::SIMDJSON_PADDING);

struct Trie {
  std::vector<std::pair<std::string, std::unique_ptr<Trie>>> children;

  const Trie* child(std::string_view key) const {
    const Trie* any = nullptr;
    for (const auto& [name, node] : children) {
      if (name == key) return node.get();
      if (name == "*") any = node.get();
    }
    return any;
  }

  void add(const JsonPath& path, std::size_t from = 0) {
    if (from == path.size()) return;
    for (auto& [name, node] : children) {
      if (name == path[from]) return node->add(path, from + 1);
    }
    children.emplace_back(path[from], std::make_unique<Trie>());
    children.back().second->add(path, from + 1);
  }
};

// An integer beyond 64 bits, which simdjson refuses and nlohmann takes (as a double).
bool long_integer_token(std::string_view t) {
  if (!t.empty() && t[0] == '-') t.remove_prefix(1);
  return t.size() > 1 && t[0] != '0' && t.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string_view trimmed(std::string_view token) {
  while (!token.empty() &&
         (token.back() == ' ' || token.back() == '\t' || token.back() == '\n' || token.back() == '\r')) {
    token.remove_suffix(1);
  }
  return token;
}

// The text of a string token (`"..."` and the blanks after it) that holds no escape, the
// usual case: it is read in place, since the first stage has checked its UTF-8 and that it
// holds no control character. Empty when it has escapes (then simdjson unescapes it).
std::optional<std::string_view> plain_string(std::string_view token) {
  token = trimmed(token);
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return std::nullopt;
  token = token.substr(1, token.size() - 2);
  if (token.find('\\') != std::string_view::npos) return std::nullopt;
  return token;
}

// Where the first stage's position-less errors are: the first invalid UTF-8 byte, the
// first control character inside a string, the opening quote of an unclosed string.
std::size_t first_stage_error_at(std::string_view text, error_code code) {
  if (code == simdjson::UTF8_ERROR) {
    for (std::size_t at = 0; at < text.size();) {
      std::size_t length = utf8_sequence_at(text, at);
      if (length == 0) return at;
      at += length;
    }
    return text.size();
  }
  bool in_string = false;
  std::size_t opened = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    char c = text[at];
    if (!in_string) {
      if (c == '"') {
        in_string = true;
        opened = at;
      }
    } else if (c == '\\') {
      ++at;
    } else if (c == '"') {
      in_string = false;
    } else if (code == simdjson::UNESCAPED_CHARS && static_cast<unsigned char>(c) < 0x20) {
      return at;
    }
  }
  return in_string ? opened : text.size();
}

std::string syntax_error(std::string_view text, std::size_t at, error_code code) {
  std::string what = code == simdjson::DEPTH_ERROR
                         ? fmt::format("nested deeper than {} arrays and objects", kMaxJsonDepth)
                         : simdjson::error_message(code);
  if (!what.empty() && what.back() == '.') what.pop_back();
  if (!what.empty() && what[0] >= 'A' && what[0] <= 'Z' &&
      (what.size() < 2 || what[1] < 'A' || what[1] > 'Z')) {
    what[0] = static_cast<char>(what[0] - 'A' + 'a');
  }
  at = std::min(at, text.size());
  std::string_view before = text.substr(0, at);
  std::size_t line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  std::size_t line_start = before.rfind('\n');
  std::size_t column = 1 + at - (line_start == std::string_view::npos ? 0 : line_start + 1);
  return fmt::format("syntax error at byte {}, line {}, column {}: {}", at, line, column, what);
}

class Filter {
 public:
  Filter(const Trie& root, const JsonStream* stream, std::string_view text)
      : trie_(root), stream_(stream), text_(text) {}

  std::string error;  // set when a walk returns false for a syntax error (not for a stop)

  bool document(od::document& doc, json& out) {
    doc_ = &doc;
    od::json_type type{};
    if (error_code e = doc.type().get(type)) return fail(e, nullptr);
    bool done = false;
    if (type == od::json_type::object) {
      od::object object;
      done = check(doc.get_object().get(object), nullptr) && walk(object, &trie_, &out, 1);
    } else if (type == od::json_type::array) {
      od::array array;
      done = check(doc.get_array().get(array), nullptr) && walk(array, &trie_, &out, 1);
    } else {  // a scalar document: its token reaches to the next structural, if any
      std::string_view token = raw_token(doc);
      const char* after = token.data() + token.size();
      if (after < text_.data() + text_.size()) return fail(simdjson::TRAILING_CONTENT, after);
      return scalar(doc, type, &out);
    }
    const char* rest = nullptr;  // past the root's end, the location is out of bounds
    if (done && doc.current_location().get(rest) == simdjson::SUCCESS) {
      return fail(simdjson::TRAILING_CONTENT, rest);
    }
    return done;
  }

 private:
  bool fail(error_code code, const char* at) {
    if (code == simdjson::INCOMPLETE_ARRAY_OR_OBJECT) {  // a cut text: named at its end
      std::string_view cut = trimmed(text_);
      at = cut.data() + cut.size();
    }
    if (at == nullptr) {
      if (doc_->current_location().get(at) != simdjson::SUCCESS) at = text_.data() + text_.size();
    }
    error = syntax_error(text_, static_cast<std::size_t>(at - text_.data()), code);
    return false;
  }
  bool check(error_code code, const char* at) { return code == simdjson::SUCCESS || fail(code, at); }

  // A value: built into `out` when it is wanted (`out` not null), else read and dropped.
  bool value(od::value& v, const Trie* trie, json* out, std::size_t depth) {
    od::json_type type{};
    if (error_code e = v.type().get(type)) return fail(e, nullptr);
    if (type == od::json_type::object || type == od::json_type::array) {
      if (depth >= kMaxJsonDepth) return fail(simdjson::DEPTH_ERROR, v.raw_json_token().data());
      if (type == od::json_type::object) {
        od::object object;
        return check(v.get_object().get(object), nullptr) && walk(object, trie, out, depth + 1);
      }
      od::array array;
      return check(v.get_array().get(array), nullptr) && walk(array, trie, out, depth + 1);
    }
    return scalar(v, type, out);
  }

  bool walk(od::object& object, const Trie* trie, json* out, std::size_t depth) {
    if (out != nullptr) *out = json::object();
    for (auto member : object) {
      od::field field;
      std::string_view key;
      if (!check(std::move(member).get(field), nullptr) || !key_of(field, key)) return false;
      const Trie* next = out != nullptr ? trie->child(key) : nullptr;
      path_.push_back(key);
      bool done = value(field.value(), next, next != nullptr ? &(*out)[std::string(key)] : nullptr, depth);
      path_.pop_back();
      if (!done) return false;
    }
    return true;
  }

  // A key without escapes is read in place (the first stage found its closing quote).
  bool key_of(od::field& field, std::string_view& key) {
    const char* start = field.key().raw();
    const char* end = start;
    while (*end != '"' && *end != '\\') ++end;
    if (*end == '"') {
      key = std::string_view(start, static_cast<std::size_t>(end - start));
      return true;
    }
    return check(field.unescaped_key().get(key), start - 1);
  }

  bool walk(od::array& array, const Trie* trie, json* out, std::size_t depth) {
    if (out != nullptr) *out = json::array();
    const Trie* next = out != nullptr ? trie->child("[]") : nullptr;
    bool streamed = next != nullptr && stream_ != nullptr && streamed_here();
    path_.emplace_back("[]");
    std::size_t index = 0;
    for (auto item : array) {
      od::value element;
      if (!check(item.get(element), nullptr)) return false;
      if (streamed) {  // an element of the streamed array: handed over when complete, not kept
        json pruned;
        if (!value(element, next, &pruned, depth)) return false;
        if (!stream_->visit(std::move(pruned), index++)) return false;
        continue;
      }
      if (next != nullptr) out->push_back(nullptr);
      if (!value(element, next, next != nullptr ? &out->back() : nullptr, depth)) return false;
    }
    path_.pop_back();
    return true;
  }

  // True when the array being entered is the streamed one: the keys on the way match.
  bool streamed_here() const {
    const JsonPath& want = stream_->array;
    if (path_.size() != want.size()) return false;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (path_[i] != want[i]) return false;
    }
    return true;
  }

  // A string, number, true, false or null (V: od::value, or od::document for a scalar root).
  template <typename V>
  bool scalar(V& v, od::json_type type, json* out) {
    const char* at = raw_token(v).data();
    switch (type) {
      case od::json_type::string: {
        std::optional<std::string_view> text = plain_string(raw_token(v));
        if (text) {  // in place: only the iterator moves on
          simdjson::simdjson_result<od::raw_json_string> moved = v.get_raw_json_string();
          if (moved.error() != simdjson::SUCCESS) return fail(moved.error(), at);
        } else {
          text.emplace();
          if (error_code e = v.get_string().get(*text)) return fail(e, at);
        }
        if (out != nullptr) *out = std::string(*text);
        return true;
      }
      case od::json_type::number:
        return number(v, out);
      case od::json_type::boolean: {
        bool flag = false;
        if (v.get_bool().get(flag) != simdjson::SUCCESS) {
          return fail(*at == 't' ? simdjson::T_ATOM_ERROR : simdjson::F_ATOM_ERROR, at);
        }
        if (out != nullptr) *out = flag;
        return true;
      }
      default: {
        bool null = false;
        if (v.is_null().get(null) != simdjson::SUCCESS || !null) return fail(simdjson::N_ATOM_ERROR, at);
        if (out != nullptr) *out = nullptr;
        return true;
      }
    }
  }

  // Numbers as nlohmann types them: a non-negative integer is unsigned, a negative one
  // signed, anything with a fraction or exponent (or beyond 64 bits) a double.
  template <typename V>
  bool number(V& v, json* out) {
    std::string_view token = trimmed(raw_token(v));
    od::number n;
    if (error_code e = v.get_number().get(n)) {
      if (!long_integer_token(token)) return fail(e, token.data());
      if (out != nullptr) *out = std::strtod(std::string(token).c_str(), nullptr);
      return true;
    }
    if (out == nullptr) return true;
    switch (n.get_number_type()) {
      case od::number_type::signed_integer:
        if (n.get_int64() >= 0) {
          *out = static_cast<json::number_unsigned_t>(n.get_int64());
        } else {
          *out = n.get_int64();
        }
        break;
      case od::number_type::unsigned_integer:
        *out = n.get_uint64();
        break;
      default:
        *out = n.get_double();
        break;
    }
    return true;
  }

  static std::string_view raw_token(od::value& v) { return v.raw_json_token(); }
  static std::string_view raw_token(od::document& d) {
    std::string_view token;
    return d.raw_json_token().get(token) == simdjson::SUCCESS ? token : std::string_view();
  }

  const Trie& trie_;
  const JsonStream* stream_;
  std::string_view text_;
  od::document* doc_ = nullptr;
  std::vector<std::string_view> path_;  // the keys down to the value being read ("[]" in arrays)
};

}  // namespace

nlohmann::json parse_json_filtered(const PaddedText& text, const std::vector<JsonPath>& keep,
                                   std::string* error, const JsonStream* stream) {
  Trie trie;
  for (const auto& path : keep) trie.add(path);
  std::string_view view = text.text();
  // The walk stops at kMaxJsonDepth itself, with its own message; the parser is given room
  // beyond it, since On Demand asserts (in a build without NDEBUG) where it would go deeper
  // than its max_depth rather than returning an error.
  od::parser parser;
  od::document doc;
  error_code e = parser.allocate(std::max<std::size_t>(view.size(), 1), kMaxJsonDepth + 2);
  if (e == simdjson::SUCCESS) {
    e = parser
            .iterate(
                simdjson::padded_string_view(view.data(), view.size(), view.size() + PaddedText::kPadding))
            .get(doc);
  }
  json out;
  std::string message;
  if (e != simdjson::SUCCESS) {
    message = syntax_error(view, e == simdjson::EMPTY ? view.size() : first_stage_error_at(view, e), e);
  } else {
    Filter filter(trie, stream, view);
    if (filter.document(doc, out)) return out;
    message = std::move(filter.error);
  }
  if (error != nullptr) *error = std::move(message);
  return json(json::value_t::discarded);
}

nlohmann::json parse_json_filtered(std::string_view text, const std::vector<JsonPath>& keep,
                                   std::string* error, const JsonStream* stream) {
  return parse_json_filtered(PaddedText::copy(text), keep, error, stream);
}

}  // namespace tmpi
