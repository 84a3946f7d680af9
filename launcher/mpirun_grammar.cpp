// See mpirun_grammar.h. Each table lists an MPI's options by the names its parser matches,
// with how many values each takes (the sources are cited in the header); a name appears once
// per table. kPair is hydra's -genv/-env: one value when it holds '=', else two.
#include "launcher/mpirun_grammar.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <span>
#include <string_view>

#include <fmt/ranges.h>

namespace tmpi::launch {

namespace {

constexpr int kPair = -1;

struct Rule {
  std::string_view name;
  int values;
  Role role = Role::kPlain;
};

using R = Role;

// ORTE's cmd_line_init (schizo_ompi.c) and the MCA options that orted_submit.c adds.
// clang-format off
constexpr std::array kOrte = std::to_array<Rule>({
    {"h", 0}, {"help", 0}, {"V", 0}, {"version", 0}, {"v", 0}, {"verbose", 0}, {"q", 0}, {"quiet", 0},
    {"report-pid", 1}, {"report-uri", 1}, {"timeout", 1}, {"report-state-on-timeout", 0},
    {"get-stack-traces", 0}, {"report-child-jobs-separately", 0}, {"hnp", 1}, {"xml", 0}, {"xml-file", 1},
    {"tag-output", 0}, {"timestamp-output", 0}, {"output-filename", 1}, {"merge-stderr-to-stdout", 0},
    {"xterm", 1}, {"stdin", 1}, {"index-argv-by-rank", 0}, {"launch-agent", 1}, {"s", 0},
    {"preload-binary", 0}, {"preload-files", 1}, {"app", 1, R::kAppFile}, {"c", 1, R::kNp}, {"np", 1, R::kNp},
    {"n", 1, R::kNp}, {"max-vm-size", 1}, {"hostfile", 1, R::kHostfile}, {"machinefile", 1, R::kHostfile},
    {"default-hostfile", 1, R::kHostfile}, {"do-not-resolve", 0}, {"ompi-server", 1}, {"cf", 1},
    {"cartofile", 1}, {"rf", 1, R::kMapping}, {"rankfile", 1, R::kMapping}, {"x", 1, R::kEnv},
    {"display-map", 0}, {"display-devel-map", 0}, {"display-topo", 0}, {"display-diffable-map", 0},
    {"H", 1, R::kHosts}, {"host", 1, R::kHosts}, {"nolocal", 0, R::kMapping},
    {"nooversubscribe", 0, R::kOversubscribe}, {"oversubscribe", 0, R::kOversubscribe},
    {"cpus-per-proc", 1, R::kMapping}, {"cpus-per-rank", 1, R::kMapping},
    {"bycore", 0, R::kMapping}, {"bynode", 0, R::kMapping}, {"byslot", 0}, {"pernode", 0, R::kPernode},
    {"npernode", 1, R::kPerNode}, {"N", 1, R::kPerNode}, {"use-hwthread-cpus", 0},
    {"npersocket", 1, R::kMapping}, {"map-by", 1, R::kMapping}, {"rank-by", 1, R::kMapping}, {"bind-to", 1},
    {"bind-to-core", 0}, {"bind-to-socket", 0}, {"report-bindings", 0}, {"cpu-list", 1},
    {"ppr", 1, R::kMapping}, {"display-allocation", 0}, {"display-devel-allocation", 0}, {"cpu-set", 1},
    {"wdir", 1}, {"wd", 1}, {"set-cwd-to-session-dir", 0}, {"path", 1}, {"tv", 0}, {"debug", 0},
    {"debugger", 1}, {"output-proctable", 0}, {"d", 0}, {"debug-devel", 0}, {"debug-daemons", 0},
    {"debug-daemons-file", 0}, {"leave-session-attached", 0}, {"do-not-launch", 0}, {"prefix", 1},
    {"noprefix", 0}, {"show-progress", 0}, {"use-regexp", 0}, {"report-events", 1}, {"enable-recovery", 0},
    {"max-restarts", 1}, {"continuous", 0}, {"disable-recovery", 0}, {"novm", 0},
    {"allow-run-as-root", 0, R::kRunAsRoot}, {"personality", 1}, {"dvm", 0}, {"terminate", 0},
    {"mca", 2, R::kMca}, {"gmca", 2, R::kMca}, {"am", 1}, {"tune", 1},
});
// clang-format on

// PRRTE's ompi personality (prterun as Open MPI 5's mpirun), its deprecated forms included.
// clang-format off
constexpr std::array kPrrte = std::to_array<Rule>({
    {"h", 0}, {"help", 0}, {"V", 0}, {"version", 0}, {"v", 0}, {"verbose", 0}, {"q", 0}, {"quiet", 0},
    {"mca", 2, R::kMca}, {"gmca", 2, R::kMca}, {"prtemca", 2, R::kMca}, {"gprtemca", 2, R::kMca},
    {"pmixmca", 2, R::kMca}, {"gpmixmca", 2, R::kMca}, {"omca", 2, R::kMca}, {"gomca", 2, R::kMca},
    {"tune", 1}, {"am", 1}, {"amca", 1}, {"stream-buffering", 1}, {"c", 1, R::kNp}, {"np", 1, R::kNp},
    {"n", 1, R::kNp}, {"N", 1, R::kPerNode}, {"npernode", 1, R::kPerNode}, {"pernode", 0, R::kPernode},
    {"H", 1, R::kHosts}, {"host", 1, R::kHosts}, {"hostfile", 1, R::kHostfile},
    {"machinefile", 1, R::kHostfile}, {"default-hostfile", 1, R::kHostfile}, {"x", 1, R::kEnv},
    {"unset-env", 1}, {"map-by", 1, R::kMapping}, {"rank-by", 1, R::kMapping}, {"bind-to", 1},
    {"rankfile", 1, R::kMapping}, {"rf", 1, R::kMapping}, {"ppr", 1, R::kMapping},
    {"npersocket", 1, R::kMapping}, {"cpus-per-proc", 1, R::kMapping}, {"cpus-per-rank", 1, R::kMapping},
    {"bynode", 0, R::kMapping}, {"bycore", 0, R::kMapping}, {"byslot", 0}, {"nolocal", 0, R::kMapping},
    {"oversubscribe", 0, R::kOversubscribe}, {"nooversubscribe", 0, R::kOversubscribe},
    {"use-hwthread-cpus", 0}, {"bind-to-core", 0},
    {"bind-to-socket", 0}, {"cpu-set", 1}, {"cpu-list", 1}, {"output", 1}, {"display", 1}, {"tag-output", 0},
    {"timestamp-output", 0}, {"merge-stderr-to-stdout", 0}, {"output-filename", 1}, {"xterm", 1},
    {"report-bindings", 0}, {"display-map", 0}, {"display-devel-map", 0}, {"display-allocation", 0},
    {"runtime-options", 1}, {"wdir", 1}, {"wd", 1}, {"path", 1}, {"prefix", 1}, {"noprefix", 0},
    {"launch-agent", 1}, {"timeout", 1}, {"spawn-timeout", 1}, {"report-state-on-timeout", 0},
    {"get-stack-traces", 0}, {"stdin", 1}, {"app", 1, R::kAppFile}, {"personality", 1}, {"pset", 1},
    {"ompi-server", 1}, {"report-pid", 1}, {"report-uri", 1}, {"preload-files", 1}, {"s", 0},
    {"preload-binary", 0}, {"max-restarts", 1}, {"enable-recovery", 0}, {"disable-recovery", 0},
    {"continuous", 0}, {"do-not-launch", 0}, {"show-progress", 0}, {"debug-daemons", 0},
    {"debug-daemons-file", 0}, {"d", 0}, {"debug-devel", 0}, {"leave-session-attached", 0}, {"xml", 0},
    {"index-argv-by-rank", 0}, {"allow-run-as-root", 0, R::kRunAsRoot}, {"fwd-mpirun-port", 0}, {"hnp", 1},
    {"dvm-uri", 1}, {"tmpdir", 1}, {"memory-alloc-kinds", 1}, {"gpu-support", 1},
});
// clang-format on

// hydra's HYD_mpiexec_match_table, with Intel MPI's -perhost and -rr.
// clang-format off
constexpr std::array kHydra = std::to_array<Rule>({
    {"help", 0}, {"h", 0}, {"genv", kPair, R::kEnv}, {"genvlist", 1, R::kEnvList},
    {"genvnone", 0, R::kEnvAll}, {"genvall", 0, R::kEnvAll}, {"f", 1, R::kHostfile},
    {"hostfile", 1, R::kHostfile}, {"machinefile", 1, R::kHostfile}, {"machine", 1, R::kHosts},
    {"machines", 1, R::kHosts}, {"machinelist", 1, R::kHosts}, {"host", 1, R::kHosts},
    {"hosts", 1, R::kHosts}, {"hostlist", 1, R::kHosts}, {"rankmap", 1, R::kMapping}, {"ppn", 1, R::kPerNode},
    {"perhost", 1, R::kPerNode}, {"rr", 0, R::kPernode}, {"profile", 0}, {"output-from", 1},
    {"prepend-rank", 0}, {"l", 0}, {"prepend-pattern", 1}, {"outfile-pattern", 1}, {"errfile-pattern", 1},
    {"outfile", 1}, {"errfile", 1}, {"wdir", 1}, {"configfile", 1, R::kAppFile}, {"env", kPair, R::kEnv},
    {"envlist", 1}, {"envnone", 0}, {"envall", 0}, {"n", 1, R::kNp}, {"np", 1, R::kNp},
    {"launcher", 1, R::kRshAgent}, {"launcher-exec", 1, R::kRshExec}, {"bootstrap", 1, R::kRshAgent},
    {"bootstrap-exec", 1, R::kRshExec}, {"enable-x", 0}, {"disable-x", 0}, {"rmk", 1}, {"topolib", 1},
    {"binding", 1}, {"bind-to", 1}, {"map-by", 1}, {"membind", 1}, {"demux", 1}, {"debug", 0},
    {"disable-auto-cleanup", 0}, {"disable-hostname-propagation", 0}, {"enable-auto-cleanup", 0},
    {"enable-hostname-propagation", 0}, {"g", 1}, {"gpus-per-proc", 1}, {"gpu-subdevs-per-proc", 1},
    {"hybrid-hosts", 0}, {"iface", 1}, {"info", 0}, {"localhost", 1}, {"nameserver", 1}, {"order-nodes", 1},
    {"pmi-port", 0}, {"print-all-exitcodes", 0}, {"skip-launch-node", 0}, {"usize", 1}, {"v", 0},
    {"verbose", 0}, {"version", 0}, {"pmi_args", 4},
});
// clang-format on

std::span<const Rule> table(Grammar grammar) {
  switch (grammar) {
    case Grammar::kOrte:
      return kOrte;
    case Grammar::kPrrte:
      return kPrrte;
    case Grammar::kHydra:
      return kHydra;
  }
  return kOrte;
}

bool same_name(std::string_view a, std::string_view b, bool any_case) {
  if (!any_case) return a == b;
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const Rule* find_rule(Grammar grammar, std::string_view name) {
  bool hydra = grammar == Grammar::kHydra;
  for (const Rule& rule : table(grammar)) {
    if (same_name(rule.name, name, hydra)) return &rule;
  }
  return nullptr;
}

bool is_option_word(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && word != "--";
}

// "--map-by=x" -> {"map-by", "x"}; hydra strips every leading dash, the others one or two.
std::pair<std::string, std::optional<std::string>> split_word(Grammar grammar, const std::string& word) {
  std::size_t start = word.find_first_not_of('-');
  if (grammar != Grammar::kHydra) start = std::min<std::size_t>(start, 2);
  std::string body = word.substr(start);
  auto eq = body.find('=');
  if (eq == std::string::npos) return {body, std::nullopt};
  return {body.substr(0, eq), body.substr(eq + 1)};
}

// The options users carry from one MPI to the other, with what the other says instead. A
// hint never repeats the option's own name, which the error names once.
struct Equivalent {
  bool under_open_mpi;  // the hint for a line read as Open MPI's (4 or 5), else as hydra's
  std::string_view name;
  std::string_view hint;
};

// clang-format off
constexpr std::array kEquivalents = std::to_array<Equivalent>({
    {true, "ppn", "it is hydra's (MPICH, Intel MPI); Open MPI puts N ranks a host with --map-by ppr:N:node"},
    {true, "perhost", "it is Intel MPI's; Open MPI puts N ranks on each host with --map-by ppr:N:node"},
    {true, "genv", "it is hydra's (MPICH, Intel MPI); Open MPI sets a variable with -x NAME=VALUE"},
    {true, "env", "it is hydra's (MPICH, Intel MPI); Open MPI sets a variable with -x NAME=VALUE"},
    {true, "genvlist", "it is hydra's (MPICH, Intel MPI); Open MPI passes a variable with -x NAME"},
    {true, "envlist", "it is hydra's (MPICH, Intel MPI); Open MPI passes a variable with -x NAME"},
    {true, "f", "it is hydra's hostfile (MPICH, Intel MPI); the launcher gives the job's, so drop it"},
    {true, "hosts", "it is hydra's (MPICH, Intel MPI); the launcher gives the job's hosts, so drop it"},
    {true, "prepend-rank", "it is hydra's (MPICH, Intel MPI); Open MPI says --tag-output"},
    {true, "l", "it is hydra's (MPICH, Intel MPI); Open MPI says --tag-output"},
    {false, "x", "it is Open MPI's; hydra sets a variable with -genv NAME VALUE, or -genvlist NAME"},
    {false, "npernode", "it is Open MPI's; hydra puts N ranks on each host with -ppn N"},
    {false, "pernode", "it is Open MPI's; hydra puts one rank on each host with -ppn 1"},
    {false, "oversubscribe", "it is Open MPI's; hydra runs more ranks than slots without it, so drop it"},
    {false, "nooversubscribe", "it is Open MPI's; hydra has no such switch, so drop it"},
    {false, "mca", "it is Open MPI's; MPICH reads MPIR_CVAR_* variables: -genv MPIR_CVAR_NAME VALUE"},
    {false, "gmca", "it is Open MPI's; MPICH reads MPIR_CVAR_* variables: -genv MPIR_CVAR_NAME VALUE"},
    {false, "tag-output", "it is Open MPI's; hydra says -prepend-rank"},
    {false, "allow-run-as-root", "it is Open MPI's; hydra runs as root without it, so drop it"},
});
// clang-format on

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::string unknown_option_hint(Grammar grammar, std::string_view name) {
  bool open_mpi = grammar != Grammar::kHydra;
  for (const Equivalent& row : kEquivalents) {
    if (row.under_open_mpi == open_mpi && row.name == lower(name)) return std::string(row.hint);
  }
  for (Grammar other : {Grammar::kOrte, Grammar::kPrrte, Grammar::kHydra}) {
    if (other != grammar && grammar_knows(other, name))
      return fmt::format("{} takes it, and this job's MPI is another; drop it or give its equivalent",
                         grammar_name(other));
  }
  return fmt::format("`mpirun --help` lists what {} takes; drop it or give its equivalent",
                     grammar_name(grammar));
}

Grammar grammar_of(Flavour flavour) {
  switch (flavour) {
    case Flavour::kOpenMpi4:
      return Grammar::kOrte;
    case Flavour::kOpenMpi5:
      return Grammar::kPrrte;
    case Flavour::kMpich:
    case Flavour::kIntel:
      return Grammar::kHydra;
  }
  return Grammar::kOrte;
}

bool grammar_knows(Grammar grammar, std::string_view name) {
  return find_rule(grammar, name) != nullptr;
}

std::string_view grammar_name(Grammar grammar) {
  switch (grammar) {
    case Grammar::kOrte:
      return "Open MPI 4's mpirun (ORTE)";
    case Grammar::kPrrte:
      return "Open MPI 5's mpirun (PRRTE)";
    case Grammar::kHydra:
      return "hydra's mpiexec (MPICH, Intel MPI)";
  }
  return "mpirun";
}

std::string option_text(const MpiOption& option) {
  return fmt::format("{}", fmt::join(option.words, " "));
}

Expected<MpirunLine> parse_mpirun_line(Grammar grammar, const std::vector<std::string>& words,
                                       bool ends_at_dashdash) {
  MpirunLine line;
  line.grammar = grammar;
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string& word = words[i];
    if (word == "--") {
      line.command.assign(words.begin() + static_cast<long>(i) + 1, words.end());
      return line;
    }
    if (!is_option_word(word)) {
      if (ends_at_dashdash && !line.options.empty() && !line.options.back().known) {
        line.options.back().words.push_back(word);  // an unknown option's value
        line.options.back().values.push_back(word);
        ++i;
        continue;
      }
      if (ends_at_dashdash)
        return make_error(Exit::kUsage, "MPI option expected before '--', found '{}'", word);
      line.command.assign(words.begin() + static_cast<long>(i), words.end());
      return line;
    }
    auto [name, inline_value] = split_word(grammar, word);
    const Rule* rule = find_rule(grammar, name);
    MpiOption option{name, {word}, {}, rule != nullptr ? rule->role : Role::kPlain, rule != nullptr};
    if (inline_value) option.values.push_back(*inline_value);
    ++i;
    int wanted = rule == nullptr ? 0 : rule->values;
    if (wanted == kPair) {
      const std::string* first = inline_value ? &*inline_value : i < words.size() ? &words[i] : nullptr;
      wanted = first != nullptr && first->find('=') != std::string::npos ? 1 : 2;
    }
    while (static_cast<int>(option.values.size()) < wanted) {
      if (i >= words.size() || (ends_at_dashdash && words[i] == "--")) {
        return make_error(Exit::kUsage, "MPI option {} takes {} value(s), got {}: give {} VALUE", word,
                          wanted, option.values.size(), word);
      }
      option.words.push_back(words[i]);
      option.values.push_back(words[i++]);
    }
    line.options.push_back(std::move(option));
  }
  return line;  // options alone (the command came separately), or no command
}

}  // namespace tmpi::launch
