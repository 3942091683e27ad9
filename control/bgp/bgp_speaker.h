// The BGP speaker: an existing, unmodified BGP daemon (BIRD 2, Debian's bird2) run as a
// supervised child in the gateway's network namespace, with the config of
// control/bgp/bird_config.h written under a runtime directory of this process's own. It talks to
// its peers through the ports' kernel twins (control/host/host_interface.h).
//
// - announce(vips): the VIPs to announce; when the set changes the config is rewritten and the
//   daemon told to reload it (its control socket, "configure"): sessions stay up, only the
//   routes change. An empty set withdraws everything (drain).
// - The daemon runs with PR_SET_PDEATHSIG: if the gateway dies (kill -9), so does it, and the
//   routers' hold timers take the gateway's routes away.
// - tick(): restarts a daemon that died (backoff 1 s doubling to 30 s), retries a reload that
//   failed, and once a second reads the sessions' state over the control socket.
// - stop(): SIGTERM (the daemon closes its sessions with a Cease notification, so the routers
//   withdraw at once), SIGKILL after 3 s; removes the runtime directory.
// - The runtime directory: the base (runtime_dir) must be owned by root or this user and not
//   writable by others unless sticky; bgp.<pid> in it is made afresh, mode 0700 (one of this
//   user's left by an earlier process of the same pid is emptied first, anyone else's refused),
//   and files in it are created exclusively, never through a link.
// - The daemon's stdout and stderr come through a pipe and are logged line by line as
//   event=bgp_daemon_output (bird_output_line), so every line on stderr is the gateway's format.
//
// Threads: everything on the control thread but status(), which any thread may call.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/bgp/bird_config.h"
#include "control/common/log.h"

namespace meshgate::ctl {

struct BgpSessionStatus {
  std::string name;  // peer0...
  IpAddr peer;
  uint32_t remote_as = 0;
  std::string state;  // the daemon's BGP state: Idle, Connect, Active, OpenSent, ..., Established
  bool up = false;
  int64_t up_since_unix = 0;  // when it was last seen Established (0: down)
  uint64_t prefixes_announced = 0;
};

struct BgpStatus {
  bool running = false;  // the daemon is alive and answers on its control socket
  pid_t pid = 0;
  uint32_t restarts = 0;
  std::vector<BgpSessionStatus> sessions;
  std::vector<IpAddr> announced;  // what the daemon was last told to announce
  std::vector<IpAddr> vips;       // every VIP the gateway has (announced or not)
};

// GET /bgp and meshgate-ctl bgp: {"daemon": {running, pid, restarts}, "sessions": [{peer,
// remote_as, state, up, uptime_s, prefixes_announced}], "vips": [{vip, announced}]}.
nlohmann::json bgp_status_json(const BgpStatus& s, int64_t now_unix);

// One line the daemon wrote ("2026-12-02 04:56:59.006 <WARN> text"): its class as the gateway's
// level, the text without the daemon's own timestamp. Untagged lines are what BIRD prints
// before dying ("bird: <file>:3:10 syntax error"): errors.
struct DaemonLine {
  LogLevel level = LogLevel::kError;
  std::string msg;
};
DaemonLine bird_output_line(std::string_view line);

class BgpSpeaker {
 public:
  BgpSpeaker(BgpPlan plan, std::string daemon, std::string runtime_dir);
  ~BgpSpeaker();
  BgpSpeaker(const BgpSpeaker&) = delete;
  BgpSpeaker& operator=(const BgpSpeaker&) = delete;

  // Creates the runtime directory, writes the config and starts the daemon (announcing
  // nothing yet). "" or the error.
  std::string start();
  // The VIPs to announce now (a subset of `all`, every VIP the gateway has).
  void announce(const std::vector<IpAddr>& vips, const std::vector<IpAddr>& all);
  void tick(std::chrono::steady_clock::time_point now);
  void stop();
  BgpStatus status() const;
  // The runtime directory's path (config, control socket).
  const std::string& dir() const { return dir_; }

 private:
  // Removes the directories of gateways that no longer run (bgp.<pid> of a dead pid).
  void remove_stale_dirs() const;
  // Makes dir_ (bgp.<pid>), 0700 and this user's; "" or the error.
  std::string make_own_dir();
  std::string write_config();
  bool spawn();
  bool reload();
  void poll_sessions();
  // No daemon: the status says so, every session down.
  void mark_down();
  // Sends one command over the control socket (none: "" only reads the greeting); the reply's
  // lines, or false and why in *error (no daemon yet, an error reply). Sets ready_.
  bool command(const std::string& cmd, std::vector<std::string>* lines, std::string* error);
  // Logs what the daemon wrote since the last call; to_eof: it exited, read all and close.
  void drain_output(bool to_eof);

  const BgpPlan plan_;
  const std::string daemon_;
  std::string base_dir_, dir_, conf_path_, ctl_path_;
  std::vector<IpAddr> announce_;
  bool reload_pending_ = false;
  pid_t pid_ = 0;
  // The daemon answered on its control socket since it started: before that a reload cannot be
  // sent and is not a failure (it reads the config as it starts, and reloads once it answers).
  bool ready_ = false;
  bool warned_not_answering_ = false;
  int output_fd_ = -1;  // the read end of the daemon's stdout and stderr
  std::string output_;  // a line it has not finished
  std::chrono::steady_clock::time_point started_at_, restart_at_, next_poll_;
  std::chrono::seconds backoff_{1};
  mutable std::mutex mu_;
  BgpStatus status_;  // under mu_
};

}  // namespace meshgate::ctl
