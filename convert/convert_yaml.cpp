// The edges of the conversion (convert.h): YAML or JSON text into a typed tree, and a tree
// back out as YAML. yaml-cpp keeps every scalar as text; the types here are those that
// Kubernetes' own reader gives them (sigs.k8s.io/yaml over go-yaml v2's resolve.go: a plain
// `2` is an integer, a plain `yes` a boolean, a quoted "2" a string), so that `replicas: 2`
// and `args: ["2"]` keep their meaning through the converter. On the way out a string that
// would read back as anything but a string is quoted.
//
// The input is hostile until copied: yaml-cpp throws on bad syntax (caught here, named by
// its line), and an alias is a shared node that a walk would expand once per use (a
// "billion laughs" document is small), so the copy counts every node it makes and stops at
// kMaxNodes, and at kMaxDepth levels.
#include <charconv>
#include <regex>
#include <string>

#include <yaml-cpp/yaml.h>

#include "convert/convert.h"

namespace tmpi::convert {

namespace {

constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxNodes = 20000;

bool one_of(const std::string& text, std::initializer_list<std::string_view> words) {
  for (auto word : words)
    if (text == word) return true;
  return false;
}

// A plain scalar as go-yaml v2 resolves it (its resolve.go): null, a boolean, an integer or
// a float; else the string itself.
Doc resolve_plain(const std::string& text) {
  if (one_of(text, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (one_of(text, {"true", "True", "TRUE", "yes", "Yes", "YES", "y", "Y", "on", "On", "ON"})) return true;
  if (one_of(text, {"false", "False", "FALSE", "no", "No", "NO", "n", "N", "off", "Off", "OFF"}))
    return false;
  // Only a number starts with a sign, a digit or a dot; the rest skip the regexes (slow, and a
  // bounded document still has 100000 scalars).
  if (std::string_view("+-.0123456789").find(text[0]) == std::string_view::npos) return text;
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex decimal("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(text, integer)) {
    long long value = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return value;
  }
  if (std::regex_match(text, decimal)) return std::stod(text);
  return text;
}

struct Copier {
  std::string_view source;
  std::size_t nodes = 0;

  Expected<Doc> copy(const YAML::Node& node, int depth) {
    if (++nodes > kMaxNodes)
      return make_error(Exit::kData,
                        "{}: more than {} YAML nodes (aliases counted at each use); an MPIJob has far fewer",
                        source, kMaxNodes);
    if (depth > kMaxDepth)
      return make_error(Exit::kData, "{}: nested deeper than {} levels; an MPIJob is not", source, kMaxDepth);
    switch (node.Type()) {
      case YAML::NodeType::Map: {
        Doc out = Doc::object();
        for (const auto& item : node) {
          if (!item.first.IsScalar())
            return make_error(Exit::kData, "{}: a map key that is not a plain name (line {})", source,
                              item.first.Mark().line + 1);
          TMPI_ASSIGN(out[item.first.Scalar()], copy(item.second, depth + 1));
        }
        return out;
      }
      case YAML::NodeType::Sequence: {
        Doc out = Doc::array();
        for (const auto& item : node) {
          TMPI_ASSIGN(Doc value, copy(item, depth + 1));
          out.push_back(std::move(value));
        }
        return out;
      }
      case YAML::NodeType::Scalar:
        if (node.Tag() == "?") return resolve_plain(node.Scalar());
        if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return Doc(node.Scalar());
        if (node.Tag().rfind("tag:yaml.org,2002:", 0) == 0) return resolve_plain(node.Scalar());
        return make_error(Exit::kData, "{}: the tag {} (line {}) is not one of YAML's own; remove it", source,
                          node.Tag(), node.Mark().line + 1);
      default:
        return Doc(nullptr);
    }
  }
};

// Whether `text`, written plain, would read back as something other than this string: go-yaml
// v2's null, boolean and number forms, and YAML 1.1's hex, octal, sexagesimal and .inf.
bool needs_quotes(const std::string& text) {
  static const std::regex numeric(
      "[-+]?(0[xob][0-9a-fA-F_]+|[0-9][0-9_:]*(\\.[0-9_]*)?([eE][-+]?[0-9]+)?|\\.[0-9]+([eE][-+]?[0-9]+)?|\\."
      "(inf|Inf|INF|nan|NaN|NAN))");
  return !resolve_plain(text).is_string() || std::regex_match(text, numeric);
}

void emit(YAML::Emitter& out, const Doc& value) {
  if (value.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, item] : value.items()) {
      out << YAML::Key << key << YAML::Value;
      emit(out, item);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& item : value) emit(out, item);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (needs_quotes(text)) out << YAML::DoubleQuoted;
    out << text;
  } else if (value.is_boolean()) {
    out << value.get<bool>();
  } else if (value.is_number_integer()) {
    out << value.get<long long>();
  } else if (value.is_number()) {
    out << value.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

Expected<Doc> parse_manifest(std::string_view text, std::string_view source) {
  if (text.size() > kMaxManifestBytes)
    return make_error(Exit::kData, "{}: {} bytes; an MPIJob is at most {} (what etcd keeps of one object)",
                      source, text.size(), kMaxManifestBytes);
  std::vector<YAML::Node> documents;
  try {
    for (auto& document : YAML::LoadAll(std::string(text)))
      if (!document.IsNull()) documents.push_back(document);
  } catch (const YAML::Exception& e) {
    return make_error(Exit::kData, "{}: not YAML or JSON: {} (line {}, column {})", source, e.msg,
                      e.mark.line + 1, e.mark.column + 1);
  }
  if (documents.size() != 1)
    return make_error(Exit::kData, "{}: {} documents; give one MPIJob (split a list with yq or kubectl)",
                      source, documents.size());
  Copier copier{source};
  return copier.copy(documents[0], 0);
}

std::string emit_yaml(const Doc& doc) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  emit(out, doc);
  return std::string(out.c_str()) + "\n";
}

}  // namespace tmpi::convert
