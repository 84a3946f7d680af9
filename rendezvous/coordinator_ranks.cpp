// The coordinator's rank reports (see coordinator.h): the agents' start, exit and misplaced
// reports, their beats, and the liveness that those beats give a host; and the hosts of the
// plan that never said a word. Every key holder
// can sign, so a report is bound to its sender as far as a shared key allows: a rank in
// [0, np), a host of hosts.json, and the address that host registered from or that its name
// resolves to (the DNS lookup is the service's, before handle(), and only for a signed,
// fresh report of this epoch). A rank's beats then come from its start report's address.
// A misplaced rank runs where hosts.json does not put it, maybe on no host of the job at all
// (the launcher's pod, where Open MPI 5 once ran every rank): its report names the host it
// runs on, and is bound to the sender by that name's addresses alone.
// The table of ranks therefore holds np entries at most, each tail cut to kTailBytes.
#include <algorithm>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

namespace {

using nlohmann::json;

// Ranks followed at most when the job's np is not known: a bound on what signed reports
// can make the coordinator keep.
constexpr long long kMaxRanks = 1 << 16;
// A report's stderr tail, kept: the agent sends 20 lines of 1 KiB of JSON at most.
constexpr std::size_t kTailBytes = 24 * 1024;

}  // namespace

long long Coordinator::max_ranks() const {
  if (config_.np > 0) return config_.np;
  long long slots = 0;
  for (const auto& [name, entry] : hosts_) slots += std::max(entry.slots, 0);
  return slots > 0 ? std::min(slots, kMaxRanks) : kMaxRanks;
}

// Whether peer is known to be host's: its registered address, or the one its rank reports
// were last found to come from. "" is this process itself (the launcher's own calls).
bool Coordinator::sender_known(const std::string& host, const std::string& peer) const {
  if (peer.empty()) return true;
  auto entry = hosts_.find(host);
  if (entry != hosts_.end() && entry->second.address == peer && entry->second.state != HostState::kLost)
    return true;
  auto found = report_address_.find(host);
  return found != report_address_.end() && found->second == peer;
}

std::optional<std::string> Coordinator::rank_host_to_resolve(const Call& call) const {
  Parsed<RankReport> parsed = parse_rank(call.parsed);
  const auto* report = std::get_if<RankReport>(&parsed);
  if (report == nullptr || report->rank >= max_ranks()) return std::nullopt;
  std::string host = canonical_host(report->host);
  if ((!hosts_.contains(host) && report->event != RankEventKind::kMisplaced) || sender_known(host, call.peer))
    return std::nullopt;
  if (!signed_by(config_.key, Kind::kRank, call.parsed) || report->epoch != config_.epoch ||
      nonces_.contains(report->nonce))
    return std::nullopt;
  return host;
}

std::optional<Refusal> Coordinator::unbound_report(const Call& call, const RankReport& report) {
  if (report.rank >= max_ranks()) {
    ++counters_["rank_refused_out_of_range"];
    return Refusal{403,
                   fmt::format("rank {} is not a rank of this job (0 to {})", report.rank, max_ranks() - 1)};
  }
  std::string host = canonical_host(report.host);
  bool resolves_to_sender =
      std::find(call.resolved.begin(), call.resolved.end(), call.peer) != call.resolved.end();
  if (!hosts_.contains(host) && report.event == RankEventKind::kMisplaced &&
      (call.peer.empty() || resolves_to_sender))
    return std::nullopt;
  if (!hosts_.contains(host)) {
    ++counters_["rank_refused_unknown_host"];
    return Refusal{404, "a rank report's host is not a host of this job (not in hosts.json)"};
  }
  if (sender_known(host, call.peer)) return std::nullopt;
  if (resolves_to_sender) {
    report_address_[host] = call.peer;
    return std::nullopt;
  }
  ++counters_["rank_refused_wrong_address"];
  return Refusal{
      403,
      fmt::format("{} does not resolve to the sender's address {} (it resolves to {})", host, call.peer,
                  call.resolved.empty() ? "nothing" : fmt::format("{}", fmt::join(call.resolved, ", ")))};
}

Reply Coordinator::rank(const Call& call, Clock::time_point now) {
  const json body = call.parsed.is_null() ? parse_body(call.body) : call.parsed;
  Parsed<RankReport> parsed = parse_rank(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  const RankReport& report = std::get<RankReport>(parsed);
  if (!signed_by(config_.key, Kind::kRank, body))
    return refuse(403, report.host, "bad proof on a rank report");
  const Asker asker{Kind::kRank, report.nonce};
  if (auto other = stale(asker, report.epoch, report.host)) return *other;
  if (auto refusal = unbound_report(call, report))
    return refuse(refusal->status, report.host, refusal->why, asker);
  if (!nonces_.insert(report.nonce).second) {
    return refuse(403, report.host, "a rank report needs a fresh nonce and a proof", asker);
  }
  // Names are DNS names (253 bytes at most); a longer one is cut, not trusted to be short.
  RankEvent event{report.rank,
                  truncate_utf8(report.host, 253),
                  report.event,
                  report.code,
                  report.signal,
                  report.seconds,
                  truncate_utf8(report.tail, kTailBytes),
                  truncate_utf8(report.expected, 253),
                  report.oom_killed,
                  report.memory_limit,
                  report.oom_counted,
                  report.left_processes};
  if (std::string host = canonical_host(event.host); hosts_.contains(host)) heard_.insert(host);
  if (!first_word_) first_word_ = now;
  // A start sent again (its first answer came too late for the agent, which sends up to three)
  // is the same start: the launcher counts each rank's start once, and its beats go on.
  auto last = ranks_.find(event.rank);
  if (event.event == RankEventKind::kStart && last != ranks_.end() &&
      last->second.event == RankEventKind::kStart && last->second.host == event.host)
    return signed_reply(
        200, answer_body(config_.key, Kind::kRank, report.nonce, JobState{job_ended_ || ranks_ending_}));
  ++counters_[event.event == RankEventKind::kStart  ? "rank_starts"
              : event.event == RankEventKind::kExit ? "rank_exits"
                                                    : "rank_misplaced"];
  ranks_[event.rank] = event;
  if (event.event != RankEventKind::kStart) {
    agents_.erase(event.rank);
  } else {
    agents_[event.rank] = AgentBeat{canonical_host(event.host), call.peer, 0, now};
  }
  if (callbacks_.rank_event) callbacks_.rank_event(event);
  return signed_reply(
      200, answer_body(config_.key, Kind::kRank, report.nonce, JobState{job_ended_ || ranks_ending_}));
}

Reply Coordinator::rank_beat(const Call& call, Clock::time_point now) {
  json body = parse_body(call.body);
  Parsed<RankBeat> parsed = parse_rank_beat(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  const RankBeat& message = std::get<RankBeat>(parsed);
  if (!signed_by(config_.key, Kind::kRankBeat, body))
    return refuse(403, message.host, "bad proof on a rank's beat");
  const Asker asker{Kind::kRankBeat, message.nonce};
  if (auto other = stale(asker, message.epoch, message.host)) return *other;
  auto it = agents_.find(message.rank);
  if (it == agents_.end()) {
    return signed_reply(409, answer_body(config_.key, Kind::kRankBeat, message.nonce,
                                         Refusal{409, "no running rank of that number"}));
  }
  AgentBeat& agent = it->second;
  if (canonical_host(message.host) != agent.host)
    return refuse(403, message.host, "a rank's beat from another host", asker);
  if (call.peer != agent.address)
    return refuse(403, message.host, "a rank's beat from another address than its start report's", asker);
  if (message.seq <= agent.seq) return refuse(403, message.host, "replayed rank beat", asker);
  agent.seq = message.seq;
  agent.last = now;
  ++counters_["rank_beats"];
  return signed_reply(
      200, answer_body(config_.key, Kind::kRankBeat, message.nonce, JobState{job_ended_ || ranks_ending_}));
}

// An agent names its host by gethostname(), the pod's short name; hosts.json has the FQDN
// (<pod>.<subdomain>). The name of hosts.json that the short one begins, else as given.
std::string Coordinator::canonical_host(const std::string& host) const {
  if (hosts_.contains(host)) return host;
  auto it = hosts_.lower_bound(host + ".");
  if (it != hosts_.end() && it->first.compare(0, host.size() + 1, host + ".") == 0) return it->first;
  return host;
}

void Coordinator::server_counts(const ServerCounts& counts, Clock::time_point now) {
  if (counts.refused + counts.accept_failures > server_counts_.refused + server_counts_.accept_failures)
    last_refusal_ = now;
  server_counts_ = counts;
}

// Silent for lost_after, and longer still when our own server refused connections since the
// last beat: then the silence may be ours (a beat turned away at the cap), and the host gets
// one more lost_after, never more, so that an overload cannot hide a dead host for long.
bool Coordinator::silent_too_long(Clock::time_point last_beat, Clock::time_point now) const {
  if (now - last_beat < config_.lost_after) return false;
  return last_refusal_ <= last_beat || now - last_beat >= 2 * config_.lost_after;
}

// A host is alive while any of its running ranks' agents beats. Without sidecars (--wait
// ssh or none) this is the only liveness signal; with them, a second one.
void Coordinator::check_agents(Clock::time_point now) {
  std::map<std::string, std::pair<Clock::time_point, int>> latest;  // host -> last beat, agents
  for (const auto& [rank, agent] : agents_) {
    auto [it, fresh] = latest.try_emplace(agent.host, agent.last, 0);
    if (!fresh) it->second.first = std::max(it->second.first, agent.last);
    ++it->second.second;
  }
  for (const auto& [host, seen] : latest) {
    if (!silent_too_long(seen.first, now) || !agents_lost_.insert(host).second) continue;
    name_lost(host, fmt::format("no beat from its {} running rank agent(s) for {} s", seen.second,
                                ms_between(seen.first, now) / 1000));
  }
}

// A host of the plan that no rank report has come from, lost_after after the job's first
// one: MPI starts the ranks of every host together (Open MPI none before every daemon has
// reported), so by then it is down, maybe since the start and with no FIN to say so (a node
// that lost power), or its agents cannot reach the launcher. Either way the job would wait
// for ranks that never join, until --timeout. Before the first report, MPI's own start-up
// runs, whose length says nothing of any host. One more lost_after when the server refused
// connections meanwhile (silent_too_long): the first word may be what was turned away. A host
// whose sidecar has registered and beats is heard from: its ranks may be held (at the start
// gate, by MPI), and its silence is the sidecar's rule to judge.
void Coordinator::check_unheard(Clock::time_point now) {
  if (!first_word_ || !silent_too_long(*first_word_, now)) return;
  for (const std::string& host : config_.ranked_hosts) {
    auto entry = hosts_.find(host);
    if (heard_.contains(host) || lookups_.contains(host) ||
        (entry != hosts_.end() && entry->second.state == HostState::kReady))
      continue;
    if (!agents_lost_.insert(host).second) continue;
    name_lost(host, fmt::format("none of its ranks has reported, {} s after the job's first rank did: "
                                "down since the start, or its rank agents cannot reach the launcher",
                                ms_between(*first_word_, now) / 1000));
  }
}

void Coordinator::lookup_started(const std::string& host) {
  ++lookups_[host];
}

void Coordinator::lookup_ended(const std::string& host) {
  auto it = lookups_.find(host);
  if (it != lookups_.end() && --it->second <= 0) lookups_.erase(it);
}

// Named lost once, unless its sidecar named it first.
void Coordinator::name_lost(const std::string& host, const std::string& why) {
  auto entry = hosts_.find(host);
  if (entry != hosts_.end()) {
    if (entry->second.state == HostState::kLost) return;
    set_state(entry->second, HostState::kLost);
    entry->second.reason = why;
  }
  if (callbacks_.host_lost) callbacks_.host_lost(host, why);
}

}  // namespace tmpi::rdv
