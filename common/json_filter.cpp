// See json_filter.h. The kept paths become a small trie; the SAX handler keeps a stack with
// one frame per open container: the node it builds and the trie node it stands at (both
// null while skipping an unwanted subtree), and the key that the next member takes. A
// value is stored only when the trie has a node for its path, so the cost of a skipped
// value is one trie lookup, and of a skipped subtree, nothing but the lexer's.
#include "common/json_filter.h"

#include <memory>

namespace tmpi {

namespace {

using nlohmann::json;

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

class FilterSax {
 public:
  FilterSax(const Trie& root, const JsonStream* stream) : trie_(root), stream_(stream) {}

  json take() { return std::move(root_); }
  std::string error;

  // Values are built only once their slot is known to be wanted: most are skipped, and
  // the lexer's buffers are copied, never moved, so it can reuse their memory.
  bool null() {
    return store([] { return json(nullptr); });
  }
  bool boolean(bool value) {
    return store([&] { return json(value); });
  }
  bool number_integer(json::number_integer_t value) {
    return store([&] { return json(value); });
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return store([&] { return json(value); });
  }
  bool number_float(json::number_float_t value, const std::string& /*raw*/) {
    return store([&] { return json(value); });
  }
  bool string(std::string& value) {
    return store([&] { return json(value); });
  }
  bool binary(json::binary_t& /*value*/) {
    return store([] { return json(nullptr); });
  }

  bool start_object(std::size_t /*size*/) { return open(false); }
  bool start_array(std::size_t /*size*/) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& name) {
    stack_.back().key = name;
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }

 private:
  struct Frame {
    json* node;        // null: this subtree is skipped
    const Trie* trie;  // where this container stands among the kept paths
    bool is_array;
    std::string key;  // the next member's key (objects)
  };

  struct Slot {
    json* node = nullptr;
    const Trie* trie = nullptr;
  };

  // Where the next value goes, or a null slot when it is not wanted.
  Slot slot() {
    if (stack_.empty()) return {&root_, &trie_};
    Frame& top = stack_.back();
    if (top.node == nullptr) return {};
    const Trie* next = top.trie->child(top.is_array ? std::string_view("[]") : std::string_view(top.key));
    if (next == nullptr) return {};
    if (top.is_array) {
      top.node->push_back(nullptr);
      return {&top.node->back(), next};
    }
    return {&(*top.node)[top.key], next};
  }

  template <typename Make>
  bool store(Make make) {
    if (Slot target = slot(); target.node != nullptr) *target.node = make();
    return true;
  }

  bool open(bool is_array) {
    Slot target = slot();
    if (target.node != nullptr) *target.node = is_array ? json::array() : json::object();
    stack_.push_back(Frame{target.node, target.trie, is_array, {}});
    return true;
  }

  bool close() {
    Frame closed = std::move(stack_.back());
    stack_.pop_back();
    if (stream_ == nullptr || closed.node == nullptr || !streamed_parent()) return true;
    // An element of the streamed array is complete: hand it over and drop it.
    json element = std::move(*closed.node);
    stack_.back().node->erase(stack_.back().node->size() - 1);
    return stream_->visit(std::move(element), streamed_++);
  }

  // True when the top frame is the streamed array: its keys on the way match the path.
  bool streamed_parent() const {
    const JsonPath& path = stream_->array;
    if (stack_.size() != path.size() + 1 || !stack_.back().is_array) return false;
    for (std::size_t i = 0; i < path.size(); ++i) {
      if (stack_[i].is_array ? path[i] != "[]" : path[i] != stack_[i].key) return false;
    }
    return true;
  }

  const Trie& trie_;
  const JsonStream* stream_;
  std::size_t streamed_ = 0;
  std::vector<Frame> stack_;
  json root_;
};

}  // namespace

nlohmann::json parse_json_filtered(std::string_view text, const std::vector<JsonPath>& keep,
                                   std::string* error, const JsonStream* stream) {
  Trie trie;
  for (const auto& path : keep) trie.add(path);
  FilterSax sax(trie, stream);
  if (!json::sax_parse(text.begin(), text.end(), &sax)) {
    if (error != nullptr) *error = sax.error;
    return json(json::value_t::discarded);
  }
  return sax.take();
}

}  // namespace tmpi
