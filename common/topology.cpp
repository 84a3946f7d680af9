// See topology.h. Rendering is deterministic (no timestamps, stable order), so a re-run of
// mpi-init writes the same bytes and a file watcher sees no change.
#include "common/topology.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <set>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/utf8.h"

namespace tmpi {

using nlohmann::json;

std::vector<std::string> Topology::host_names() const {
  std::vector<std::string> names;
  names.reserve(hosts.size());
  for (const auto& host : hosts) names.push_back(host.name);
  return names;
}

int Topology::total_slots() const {
  std::int64_t total = 0;
  for (const auto& host : hosts) total += std::max(host.slots, 0);
  return static_cast<int>(std::min<std::int64_t>(total, INT32_MAX));
}

std::vector<Host> Topology::all_pods() const {
  std::vector<Host> out;
  std::set<std::string> seen;
  if (launcher) {
    out.push_back(*launcher);
    seen.insert(launcher->name);
  }
  for (const auto& host : hosts) {
    if (seen.insert(host.name).second) out.push_back(host);
  }
  return out;
}

std::string render_hostfile(const Topology& topology, Dialect dialect) {
  std::string out;
  for (const auto& host : topology.hosts) {
    if (dialect == Dialect::kHydra) {
      out += fmt::format("{}:{}\n", host.name, host.slots);
    } else {
      // Open MPI, PRRTE and DeepSpeed (which parses ^(\S+)\s+slots=(\d+)) share one form.
      out += fmt::format("{} slots={}\n", host.name, host.slots);
    }
  }
  return out;
}

namespace {

// A field of hosts.json that may be absent (then `field` keeps its default), read without
// exceptions: a string, or a whole number from 0 to INT32_MAX (slots are bounded later).
Status read_field(const json& item, const char* key, std::string& field, std::string_view where) {
  auto it = item.find(key);
  if (it == item.end()) return ok_status();
  if (!it->is_string()) return make_error(Exit::kData, "{}: \"{}\" must be a string", where, key);
  field = it->get<std::string>();
  return ok_status();
}
Status read_field(const json& item, const char* key, int& field, std::string_view where) {
  auto it = item.find(key);
  if (it == item.end()) return ok_status();
  std::int64_t value = it->is_number_integer() ? int_at(*it, "", -1) : -1;
  if (value < 0 || value > INT32_MAX) {
    return make_error(Exit::kData, "{}: \"{}\" must be a whole number from 0 to {}, not {}", where, key,
                      INT32_MAX, truncate_utf8(it->dump(), 40, "..."));
  }
  field = static_cast<int>(value);
  return ok_status();
}

Expected<Host> host_from_json(const json& item, std::string_view where) {
  if (!item.is_object()) return make_error(Exit::kData, "{}: expected an object", where);
  if (!item.contains("name")) return make_error(Exit::kData, "{}: each host needs a string \"name\"", where);
  Host host;
  TMPI_CHECK(read_field(item, "name", host.name, where));
  for (auto [key, field] :
       {std::pair{"address", &host.address}, std::pair{"pod", &host.pod}, std::pair{"group", &host.group}}) {
    TMPI_CHECK(read_field(item, key, *field, where));
  }
  std::string role(choice_name(host.role, kPodRoleSpellings));
  TMPI_CHECK(read_field(item, "role", role, where));
  auto known = choice_value(role, kPodRoleSpellings);
  if (!known) {
    return make_error(Exit::kData, "{}: \"role\" must be \"launcher\" or \"node\", not {}", where,
                      truncate_utf8(json(role).dump(), 40, "..."));
  }
  host.role = *known;
  for (auto [key, field] : {std::pair{"slots", &host.slots}, std::pair{"gpus", &host.gpus},
                            std::pair{"jobIndex", &host.job_index}, std::pair{"podIndex", &host.pod_index}}) {
    TMPI_CHECK(read_field(item, key, *field, where));
  }
  return host;
}

}  // namespace

std::string render_hosts_json(const Topology& topology) {
  // Written field by field rather than through a DOM: 10,000 hosts are a hot path, and the
  // order of fields stays as a reader expects it. Strings go through json's own quoting.
  auto quote = [](const std::string& text) { return dump_json(json(text)); };
  auto host_text = [&](const Host& host) {
    return fmt::format(
        "{{\"name\": {}, \"address\": {}, \"slots\": {}, \"gpus\": {}, \"role\": {}, \"pod\": {}, "
        "\"group\": {}, \"jobIndex\": {}, \"podIndex\": {}}}",
        quote(host.name), quote(host.address), host.slots, host.gpus,
        quote(std::string(choice_name(host.role, kPodRoleSpellings))), quote(host.pod), quote(host.group),
        host.job_index, host.pod_index);
  };
  std::string out = fmt::format(
      "{{\n  \"apiVersion\": \"trainer-mpi/v1\",\n  \"jobset\": {},\n  \"subdomain\": {},\n  \"launcher\": "
      "{},\n"
      "  \"totalSlots\": {},\n  \"hosts\": [",
      quote(topology.jobset), quote(topology.subdomain),
      topology.launcher ? host_text(*topology.launcher) : "null", topology.total_slots());
  for (std::size_t i = 0; i < topology.hosts.size(); ++i) {
    out += (i == 0 ? "\n    " : ",\n    ") + host_text(topology.hosts[i]);
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string render_discover_hosts(const Topology& topology) {
  std::string out =
      "#!/bin/sh\n# Written by mpi-init: the hosts of this job, for horovodrun --host-discovery-script.\n";
  // Every word single-quoted, though validate_topology() lets no shell character through.
  auto quoted = [](std::string text) {
    for (std::size_t at = text.find('\''); at != std::string::npos; at = text.find('\'', at + 4)) {
      text.replace(at, 1, "'\\''");
    }
    return "'" + text + "'";
  };
  for (const auto& host : topology.hosts) {
    out += fmt::format("echo {}\n", quoted(fmt::format("{}:{}", host.name, host.slots)));
  }
  return out;
}

Expected<Topology> parse_hosts_json(std::string_view text, std::string_view origin) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error(Exit::kData, "{}: not a JSON object; re-create it with mpi-init", origin);
  }
  Topology topology;
  TMPI_CHECK(read_field(doc, "jobset", topology.jobset, origin));
  TMPI_CHECK(read_field(doc, "subdomain", topology.subdomain, origin));
  if (doc.contains("launcher") && doc["launcher"].is_object()) {
    TMPI_ASSIGN(topology.launcher, host_from_json(doc["launcher"], fmt::format("{}: launcher", origin)));
  }
  if (!doc.contains("hosts") || !doc["hosts"].is_array()) {
    return make_error(Exit::kData, "{}: field \"hosts\" must be an array", origin);
  }
  for (std::size_t i = 0; i < doc["hosts"].size(); ++i) {
    TMPI_ASSIGN(Host host, host_from_json(doc["hosts"][i], fmt::format("{}: hosts[{}]", origin, i)));
    topology.hosts.push_back(std::move(host));
  }
  TMPI_CHECK(validate_topology(topology, origin));
  return topology;
}

bool valid_address(std::string_view address) {
  if (address.empty() || address.size() >= INET6_ADDRSTRLEN) return false;
  std::string text(address);
  in6_addr buffer{};
  return inet_pton(AF_INET, text.c_str(), &buffer) == 1 || inet_pton(AF_INET6, text.c_str(), &buffer) == 1;
}

bool valid_host_name(std::string_view name) {
  if (valid_address(name)) return true;
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;  // an empty label, or one ending in '-'
      label = 0;
      continue;
    }
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && label > 0)) return false;  // a label starts with a letter or digit
    if (++label > 63) return false;
  }
  return label > 0 && name.back() != '-';
}

namespace {

// The first of a host's fields that is not safe to write, or "".
std::string unsafe_field(const Host& host) {
  auto shown = [](std::string_view text) { return dump_json(json(truncate_utf8(text, 80, "..."))); };
  if (!valid_host_name(host.name)) {
    return fmt::format("host name {} is not an RFC 1123 DNS name or an IP address", shown(host.name));
  }
  if (!host.address.empty() && !valid_address(host.address)) {
    return fmt::format("host {}: address {} is not an IPv4 or IPv6 address", host.name, shown(host.address));
  }
  for (const auto* field : {&host.pod, &host.group}) {
    if (!field->empty() && !valid_host_name(*field)) {
      return fmt::format("host {}: pod or group name {} is not an RFC 1123 name", host.name, shown(*field));
    }
  }
  return "";
}

}  // namespace

Status validate_topology(const Topology& topology, std::string_view origin) {
  for (const auto* name : {&topology.jobset, &topology.subdomain}) {
    if (!name->empty() && !valid_host_name(*name)) {
      return make_error(Exit::kData, "{}: the JobSet or subdomain name {} is not an RFC 1123 name", origin,
                        dump_json(json(truncate_utf8(*name, 80, "..."))));
    }
  }
  if (topology.launcher) {
    if (auto problem = unsafe_field(*topology.launcher); !problem.empty()) {
      return make_error(Exit::kData, "{}: the launcher's {}; fix the source", origin, problem);
    }
  }
  for (const auto& host : topology.hosts) {
    if (host.name.empty()) continue;  // named below
    if (auto problem = unsafe_field(host); !problem.empty()) {
      return make_error(Exit::kData,
                        "{}: {}; fix the source (a pod's hostname and subdomain, or the hostfile)", origin,
                        problem);
    }
  }
  if (topology.hosts.empty()) {
    return make_error(Exit::kData,
                      "{}: no hosts to run ranks on; check the source, or pass "
                      "--launcher-as-node for a single-pod job",
                      origin);
  }
  if (topology.hosts.size() > kMaxHosts) {
    return make_error(Exit::kData, "{}: {} hosts; a job has at most {}", origin, topology.hosts.size(),
                      kMaxHosts);
  }
  std::set<std::string> names;
  std::int64_t total = 0;
  for (const auto& host : topology.hosts) {
    if (host.name.empty()) return make_error(Exit::kData, "{}: a host has an empty name", origin);
    if (!names.insert(host.name).second) {
      return make_error(Exit::kData, "{}: host {} appears twice; list each host once", origin, host.name);
    }
    if (host.slots < 1 || host.slots > kMaxSlotsPerHost) {
      return make_error(Exit::kData, "{}: host {} has {} slots; slots must be from 1 to {}", origin,
                        host.name, host.slots, kMaxSlotsPerHost);
    }
    total += host.slots;
  }
  if (total > kMaxTotalSlots) {
    return make_error(Exit::kData,
                      "{}: {} slots in all; a job has at most {} (--np's bound): fewer slots a host", origin,
                      total, kMaxTotalSlots);
  }
  return ok_status();
}

}  // namespace tmpi
