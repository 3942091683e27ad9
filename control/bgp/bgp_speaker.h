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
//
// Threads: everything on the control thread but status(), which any thread may call.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/bgp/bird_config.h"

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
  std::string write_config();
  bool spawn();
  bool reload();
  void poll_sessions();
  // No daemon: the status says so, every session down.
  void mark_down();
  // Sends one command over the control socket; the reply's lines, or false (no daemon, error).
  bool command(const std::string& cmd, std::vector<std::string>* lines);

  const BgpPlan plan_;
  const std::string daemon_;
  std::string base_dir_, dir_, conf_path_, ctl_path_;
  std::vector<IpAddr> announce_;
  bool reload_pending_ = false;
  pid_t pid_ = 0;
  std::chrono::steady_clock::time_point started_at_, restart_at_, next_poll_;
  std::chrono::seconds backoff_{1};
  mutable std::mutex mu_;
  BgpStatus status_;  // under mu_
};

}  // namespace meshgate::ctl
