// See mpirun_line.h. The owned options are checked one by one as they come; each check
// either takes the option (it agrees with the job), passes it, or returns the error. What
// depends on the whole line (the rank count against the slots, which a later --oversubscribe
// allows) is checked after the last option.
#include "launcher/mpirun_line.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <fmt/ranges.h>

#include "common/params.h"

namespace tmpi::launch {

namespace {

bool same_host(std::string_view a, std::string_view b) {
  return a == b || a.substr(0, a.find('.')) == b.substr(0, b.find('.'));
}

std::optional<int> positive(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::string layout_text(const std::vector<JobHost>& hosts) {
  std::vector<std::string> parts;
  parts.reserve(hosts.size());
  for (const auto& host : hosts) parts.push_back(fmt::format("{}:{}", host.name, host.slots));
  return fmt::format("{}", fmt::join(parts, ","));
}

// Whether `given` names the job's hosts, each once, with the job's slots where it says them.
bool same_hosts(const std::vector<JobHost>& given, const std::vector<JobHost>& job, bool slots_said) {
  if (given.size() != job.size()) return false;
  std::vector<bool> used(job.size(), false);
  for (const auto& host : given) {
    auto match = std::find_if(job.begin(), job.end(), [&](const JobHost& candidate) {
      auto index = static_cast<std::size_t>(&candidate - job.data());
      return !used[index] && same_host(candidate.name, host.name) &&
             (!slots_said || candidate.slots == host.slots);
    });
    if (match == job.end()) return false;
    used[static_cast<std::size_t>(match - job.begin())] = true;
  }
  return true;
}

// An Open MPI ("host slots=N") or hydra ("host:N") hostfile; comments and blanks left out.
std::vector<JobHost> parse_hostfile(const std::string& text) {
  std::vector<JobHost> hosts;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string name;
    if (!(words >> name)) continue;
    JobHost host{name, 1};
    if (auto colon = name.find(':'); colon != std::string::npos) {
      host = {name.substr(0, colon), positive(name.substr(colon + 1)).value_or(1)};
    }
    for (std::string word; words >> word;) {
      if (word.starts_with("slots=")) host.slots = positive(word.substr(6)).value_or(1);
    }
    hosts.push_back(host);
  }
  return hosts;
}

// "a,b:2" (Open MPI's -H, hydra's -hosts); whether any slot count was said.
std::vector<JobHost> parse_host_list(const std::string& text, bool& slots_said) {
  std::vector<JobHost> hosts;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    slots_said = slots_said || colon != std::string::npos;
    hosts.push_back({item.substr(0, colon),
                     colon == std::string::npos ? 1 : positive(item.substr(colon + 1)).value_or(0)});
  }
  return hosts;
}

Error refused(const MpiOption& option, std::string_view reason) {
  return Error{Exit::kUsage, fmt::format("mpirun option {} is refused under mpi-launcher: {}",
                                         option_text(option), reason)};
}

// --mca K V and its kin: the launch's own keys are the launcher's.
Status check_mca(const MpiOption& option) {
  const std::string& key = option.values.at(0);
  const std::string& value = option.values.at(1);
  if (key == "plm_rsh_agent" || key == "plm_ssh_agent" || key == "orte_rsh_agent") {
    std::string program = value.substr(0, value.find(' '));
    if (program == "ssh" || program.ends_with("/ssh")) return ok_status();
    return refused(option,
                   "it starts MPI's daemons through another program than the job's ssh, which has the "
                   "job's port, key, known_hosts and the relay; drop it");
  }
  if (key == "plm_rsh_args" || key == "plm_ssh_args")
    return refused(option, "the launcher gives ssh the job's port, key and known_hosts itself; drop it");
  if (key == "plm" && value != "rsh" && value != "ssh")
    return refused(option, "another launcher than ssh cannot reach the job's pods; drop it");
  return ok_status();
}

// The MCA keys that agree with the launcher's own and are so left out.
bool mca_taken(const MpiOption& option) {
  const std::string& key = option.values.at(0);
  return key == "plm_rsh_agent" || key == "plm_ssh_agent" || key == "orte_rsh_agent" || key == "plm";
}

struct Taking {
  const LineContext& job;
  TakenLine out;
  const MpiOption* np_option = nullptr;
  int per_host = 0;            // ranks on each host, where the line says so
  bool oversubscribe = false;  // Open MPI may run more ranks than slots: the last word said
};

std::string lowered(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Open MPI's --map-by modifiers, any case: ORTE's "node:OVERSUBSCRIBE", PRRTE's
// ":oversubscribe" or "ppr:2:node:oversubscribe,span"; the last one said counts.
void note_map_by_oversubscribe(Taking& state, const std::string& value) {
  std::string token;
  std::istringstream parts(lowered(value));
  while (std::getline(parts, token, ':')) {
    std::istringstream modifiers(token);
    for (std::string modifier; std::getline(modifiers, modifier, ',');) {
      if (modifier == "oversubscribe") state.oversubscribe = true;
      if (modifier == "nooversubscribe") state.oversubscribe = false;
    }
  }
}

// An option that places ranks: the by-slot check no longer holds, and a per-host count
// (ppr:N:node, -N N, -ppn N, --pernode) sets the rank count where none is given.
void note_placement(Taking& state, const MpiOption& option) {
  std::string value = lowered(option.values.empty() ? "" : option.values.front());
  if (option.role == Role::kPernode) state.per_host = 1;
  if (option.role == Role::kPerNode) state.per_host = positive(value).value_or(0);
  if (option.role == Role::kMapping && option.name == "map-by") {
    note_map_by_oversubscribe(state, value);
    // By slot still, with leave to oversubscribe: the agents' layout wraps round as mpirun does.
    if (value == "slot" || value == "slot:oversubscribe" || value == ":oversubscribe") return;
    if (value.starts_with("ppr:") && value.ends_with(":node"))
      state.per_host = positive(value.substr(4, value.size() - 9)).value_or(0);
  }
  state.out.placement = option_text(option);
}

// Whether the option is taken (left out) or passed; an error where it conflicts or breaks.
Expected<bool> take(Taking& state, const MpiOption& option) {
  const LineContext& job = state.job;
  switch (option.role) {
    case Role::kHostfile: {
      TMPI_ASSIGN(std::string text, job.read_file(option.values.at(0)));
      std::vector<JobHost> given = parse_hostfile(text);
      if (same_hosts(given, job.hosts, true)) return true;
      return refused(option,
                     fmt::format("it lists {}, not the job's hosts and slots {} ({}); give {} or no hostfile",
                                 layout_text(given), layout_text(job.hosts), job.hostfile, job.hostfile));
    }
    case Role::kHosts: {
      bool slots_said = false;
      std::vector<JobHost> given = parse_host_list(option.values.at(0), slots_said);
      if (same_hosts(given, job.hosts, slots_said)) return true;
      return refused(option,
                     fmt::format("it names other hosts than the job's {}; drop it", layout_text(job.hosts)));
    }
    case Role::kNp: {
      auto np = positive(option.values.at(0));
      if (!np)
        return make_error(Exit::kUsage, "mpirun option {}: needs a rank count of 1 or more",
                          option_text(option));
      if (job.np > 0 && *np != job.np)
        return make_error(Exit::kUsage,
                          "mpirun option {} and mpi-launcher's --np {} disagree; give one of them",
                          option_text(option), job.np);
      if (state.np_option != nullptr && *np != state.out.np)
        return make_error(Exit::kUsage, "mpirun options {} and {} disagree; give one",
                          option_text(*state.np_option), option_text(option));
      state.np_option = &option;
      state.out.np = *np;
      return true;
    }
    case Role::kEnvList: {
      std::istringstream names(option.values.at(0));
      for (std::string name; std::getline(names, name, ',');) {
        if (!name.empty()) state.out.env_names.push_back(name);
      }
      return true;
    }
    case Role::kEnvAll:
      return refused(option,
                     "hydra takes one global environment option and the launcher's is -genvlist; name the "
                     "variables with -genvlist A,B or mpi-launcher's --env/--env-prefix");
    case Role::kMca:
      TMPI_CHECK(check_mca(option));
      return mca_taken(option);
    case Role::kRshAgent:
      if (option.values.at(0) == "ssh") return true;
      return refused(option, "another launcher than ssh cannot reach the job's pods; drop it");
    case Role::kRshExec:
      return refused(option,
                     "the launcher runs ssh with the job's port, key and known_hosts itself; drop it");
    case Role::kAppFile:
      return refused(option,
                     "every rank must run under the rank agent, and an app file's commands would not; give "
                     "the command on the line");
    case Role::kRunAsRoot:
      return job.as_root;  // the launcher passes it itself as root
    case Role::kOversubscribe:
      state.oversubscribe = option.name == "oversubscribe";
      return false;
    case Role::kPerNode:
    case Role::kPernode:
    case Role::kMapping:
      note_placement(state, option);
      return false;
    case Role::kEnv:
    case Role::kPlain:
      return false;
  }
  return false;
}

// An option the MPI's own parser does not know: mpirun refuses it (Open MPI 4: `mpirun:
// Error: unknown option "--bogus"`), and passed on, its value would become the command and
// the rank agent another word of the user's. Refused here first, with the other MPI's name.
Status check_known(const MpiOption& option, Grammar grammar) {
  if (option.known) return ok_status();
  return make_error(Exit::kUsage, "mpirun option \"{}\" is unknown to {}, which refuses it; {}",
                    option.words.at(0), grammar_name(grammar), unknown_option_hint(grammar, option.name));
}

// Open MPI's mpirun refuses more ranks than slots unless told to oversubscribe ("There are not
// enough slots available in the system to satisfy the N slots that were requested by the
// application"), after its daemons started on every node; said here before anything runs.
// hydra places ranks past the slots round after round and refuses nothing, and the agents'
// layout check wraps round the same way, so under hydra the count stands (docs/design.md).
Status check_slots(const Taking& state, Grammar grammar) {
  if (grammar == Grammar::kHydra || state.np_option == nullptr || state.oversubscribe) return ok_status();
  int slots = 0;
  for (const auto& host : state.job.hosts) slots += host.slots;
  if (slots == 0 || state.out.np <= slots) return ok_status();
  return make_error(Exit::kUsage,
                    "mpirun option {} asks for {} ranks, and the job has {} slots on {} host(s); {} refuses "
                    "more ranks than slots without leave to oversubscribe: give {} ranks or fewer, more "
                    "nodes or slots (the TrainJob's numNodes; a pod's slots are its nvidia.com/gpu limit "
                    "or mpi-init's --slots), or --oversubscribe",
                    option_text(*state.np_option), state.out.np, slots, state.job.hosts.size(),
                    grammar_name(grammar), slots);
}

bool is_boolean(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"1", "0", "true", "false", "yes", "no", "on", "off"}) {
    if (text == word) return true;
  }
  return false;
}

}  // namespace

Expected<TakenLine> take_mpirun_line(const MpirunLine& line, const LineContext& job) {
  Taking state{job, {}};
  for (const auto& option : line.options) {
    TMPI_CHECK(check_known(option, line.grammar));
    TMPI_ASSIGN(bool taken, take(state, option));
    if (!taken) state.out.passed.insert(state.out.passed.end(), option.words.begin(), option.words.end());
  }
  if (std::find(line.command.begin(), line.command.end(), ":") != line.command.end()) {
    return make_error(
        Exit::kUsage,
        "the mpirun line runs several programs (MPMD, ':'), which is refused under mpi-launcher: every "
        "rank runs under the rank agent; run one program that picks its part by rank");
  }
  TMPI_CHECK(check_slots(state, line.grammar));
  if (state.out.np == 0 && job.np == 0 && state.per_host > 0)
    state.out.np = state.per_host * static_cast<int>(job.hosts.size());
  return state.out;
}

RunArgs split_run_args(const std::vector<std::string>& args, unsigned scope) {
  RunArgs out;
  auto dashdash = std::find(args.begin(), args.end(), "--");
  const std::string mpi_arg = fmt::format("--{}", param::kMpiArg.name);
  for (auto it = args.begin(); it != dashdash; ++it) {
    const std::string& word = *it;
    if (word == mpi_arg && it + 1 != dashdash) {
      out.mpi_words.push_back(*++it);
      continue;
    }
    if (word.starts_with(mpi_arg + "=")) {
      out.mpi_words.push_back(word.substr(mpi_arg.size() + 1));
      continue;
    }
    std::string name = word.starts_with("--") ? word.substr(2, word.find('=') - 2) : "";
    const ParamSpec* spec = nullptr;
    for (const auto& row : param_table()) {
      if ((row.scopes & scope) != 0 && row.name == name) spec = &row;
    }
    if (word == "-h" || word == "--help" || spec != nullptr) {
      out.launcher_args.push_back(word);
      // A flag's value is its own word too, but a boolean's only after '=': a boolean word after a
      // bare one ("--preflight false") stays with it, for Params::parse to refuse with the fix.
      bool takes_value = spec != nullptr && word.find('=') == std::string::npos &&
                         (spec->type != ParamType::kBool || (it + 1 != dashdash && is_boolean(*(it + 1))));
      if (takes_value && it + 1 != dashdash) out.launcher_args.push_back(*++it);
      continue;
    }
    out.mpi_words.push_back(word);
  }
  out.launcher_args.insert(out.launcher_args.end(), dashdash, args.end());
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace tmpi::launch
