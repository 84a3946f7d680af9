// See ssh/call.h. OpenSSH's options (ssh(1), OpenSSH 9.2 in Debian 12), as the relay sees them:
//   ignored, since the relay's connection already is what they ask for or they change nothing
//   it does:  -1 -2 -4 -6 -a -C -g -k -K -n -q -T -x -y, and -c -E -F -i -m with their argument
//   read:     -l USER, -p PORT, -o Port=/User=, and the -o keys in kIgnoredOptions; of these,
//             -F, -i and -o IdentityFile/UserKnownHostsFile/StrictHostKeyChecking are kept too,
//             for mpi-ssh-client, which makes its own connection (ssh/client.h), and so are
//             -n, -q, -T and -t, which it honours for a person's terminal (ssh/terminal.h)
//   anything else (-A -f -G -L -M -N -R -s -v -V -W -X -Y, -B -D -I -J -O -P -Q -S -w -b -e,
//   another -o key, an ssh:// address): the real ssh runs it.
// A login (no command) and -t are no request for the relay, whose daemons never have a
// terminal: mpi-ssh gives them to the real ssh, or to mpi-ssh-client (relay_refusal).
#include "ssh/call.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace tmpi::launch {

namespace {

constexpr std::string_view kIgnoredFlags = "1246aCgkKnqTxy";
constexpr std::string_view kIgnoredWithArgument = "cEFim";
constexpr std::string_view kAllFlags = "1246afgknqstvxACGKMNTVXYy";
constexpr std::string_view kAllWithArgument = "bceilmopBDEFIJLOPQRSWw";

// -o keys (lower case) that describe the connection the relay already holds, or nothing it uses.
const std::set<std::string, std::less<>> kIgnoredOptions = {"addressfamily",
                                                            "batchmode",
                                                            "checkhostip",
                                                            "compression",
                                                            "connectionattempts",
                                                            "connecttimeout",
                                                            "forwardx11",
                                                            "globalknownhostsfile",
                                                            "hashknownhosts",
                                                            "identitiesonly",
                                                            "identityfile",
                                                            "kexalgorithms",
                                                            "loglevel",
                                                            "passwordauthentication",
                                                            "pubkeyauthentication",
                                                            "serveralivecountmax",
                                                            "serveraliveinterval",
                                                            "stricthostkeychecking",
                                                            "tcpkeepalive",
                                                            "updatehostkeys",
                                                            "userknownhostsfile"};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  return out;
}

std::optional<int> parse_port(std::string_view text) {
  int port = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (error != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    return std::nullopt;
  return port;
}

// A name or an address that a resolver may be given: no shell or ssh syntax in it.
bool plain_host(std::string_view host) {
  return !host.empty() && host.size() <= 253 && host.front() != '-' &&
         host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:") ==
             std::string_view::npos;
}

// One option and its argument, into `call`; false when the relay cannot honour it.
bool take_option(char flag, std::string_view value, SshCall& call) {
  if (flag == 'n') call.no_stdin = true;
  if (flag == 'q') call.quiet = true;
  if (flag == 'T') {  // the last of -t and -T counts, as in ssh.c (options.request_tty)
    call.no_tty = true;
    call.tty_requests = 0;
  }
  if (flag == 't') {  // ssh.c: -t asks for a pty, a second forces one, a third asks again
    call.tty_requests = call.tty_requests == 1 ? 2 : 1;
    call.no_tty = false;
    return true;
  }
  auto first = [](std::string& field, std::string_view given) {
    if (field.empty()) field = given;
  };
  if (flag == 'i') first(call.identity_file, value);
  if (flag == 'F') first(call.config_file, value);
  if (kIgnoredFlags.find(flag) != std::string_view::npos) return true;
  if (kIgnoredWithArgument.find(flag) != std::string_view::npos) return true;
  if (flag == 'l') {
    call.user = value;
    return true;
  }
  if (flag == 'p') {
    call.port = parse_port(value);
    return call.port.has_value();
  }
  if (flag != 'o') return false;
  std::size_t split = value.find_first_of("= \t");
  std::string key = lower(value.substr(0, split));
  std::string_view setting = split == std::string_view::npos ? "" : value.substr(split + 1);
  setting.remove_prefix(std::min(setting.find_first_not_of("= \t"), setting.size()));
  if (key == "port") {
    call.port = parse_port(setting);
    return call.port.has_value();
  }
  if (key == "user") {
    call.user = setting;
    return true;
  }
  if (key == "identityfile") first(call.identity_file, setting);
  if (key == "userknownhostsfile") first(call.known_hosts_file, setting);
  if (key == "loglevel") {  // below INFO, ssh prints no notice (ssh.c, logit)
    std::string level = lower(setting);
    call.quiet = call.quiet || level == "quiet" || level == "fatal" || level == "error";
  }
  if (key == "stricthostkeychecking" && !call.strict_host_keys)
    call.strict_host_keys = lower(setting) == "yes";
  return kIgnoredOptions.contains(key);
}

}  // namespace

SshCall parse_ssh_call(const std::vector<std::string>& args) {
  SshCall call;
  auto refuse = [&](std::string why) {
    if (call.not_relayable.empty()) call.not_relayable = std::move(why);
  };
  std::size_t i = 0;
  bool have_host = false, options_done = false;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--" && !options_done) {  // no option follows; then the host, or the command
      options_done = true;
      ++i;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || options_done) {
      if (have_host) break;  // the command's first word
      std::string_view host = arg;
      if (std::size_t at = host.rfind('@'); at != std::string_view::npos) {
        call.user = host.substr(0, at);
        host.remove_prefix(at + 1);
      }
      call.host = host;
      if (!plain_host(call.host)) refuse("the host is not a plain name");
      have_host = true;
      ++i;
      if (options_done) break;
      continue;  // ssh reads options after the host too, up to the command
    }
    ++i;
    for (std::size_t c = 1; c < arg.size(); ++c) {
      char flag = arg[c];
      if (kAllWithArgument.find(flag) != std::string_view::npos) {
        std::string value;
        if (c + 1 < arg.size()) {
          value = arg.substr(c + 1);
        } else if (i < args.size()) {
          value = args[i++];
        } else {
          refuse(std::string("-") + flag + " has no argument");
        }
        if (!take_option(flag, value, call)) refuse(std::string("-") + flag + " " + value);
        break;
      }
      if (kAllFlags.find(flag) == std::string_view::npos || !take_option(flag, "", call))
        refuse(std::string("-") + flag);
    }
  }
  if (!have_host) refuse("no host");
  for (; i < args.size(); ++i) call.command += (call.command.empty() ? "" : " ") + args[i];
  if (call.user.size() > 255 || call.command.size() > kRelayMaxRequest - 1024) refuse("too long");
  return call;
}

std::string relay_refusal(const SshCall& call) {
  if (!call.not_relayable.empty()) return call.not_relayable;
  if (call.command.empty()) return "no command (a login shell)";
  if (call.tty_requests > 0) return "-t (a terminal)";
  return "";
}

std::string encode_relay_request(const SshCall& call) {
  std::string out = call.host;
  out += '\0';
  out += call.user;
  out += '\0';
  out += call.port ? std::to_string(*call.port) : "";
  out += '\0';
  out += call.command;
  return out;
}

std::optional<SshCall> decode_relay_request(std::string_view body) {
  std::vector<std::string_view> fields;
  for (int f = 0; f < 3; ++f) {
    std::size_t end = body.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    fields.push_back(body.substr(0, end));
    body.remove_prefix(end + 1);
  }
  if (body.find('\0') != std::string_view::npos || body.empty()) return std::nullopt;
  SshCall call;
  call.host = fields[0];
  call.user = fields[1];
  call.command = body;
  if (!plain_host(call.host) || call.user.size() > 255 ||
      call.user.find_first_of("\n\r") != std::string::npos)
    return std::nullopt;
  if (!fields[2].empty()) {
    call.port = parse_port(fields[2]);
    if (!call.port) return std::nullopt;
  }
  return call;
}

}  // namespace tmpi::launch
