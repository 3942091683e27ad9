// The kernel side of a host interface: the addresses of a network interface in the gateway's
// network namespace, set over rtnetlink, and its per-interface settings (sysctl). Each returns
// "" when done, else what went wrong. Control thread.
#pragma once

#include <string>

#include "dataplane/common/net_types.h"

namespace meshgate::ctl {

// The interface index of `name`, or 0 when it does not exist.
int interface_index(const std::string& name);

// Adds `prefix` (address and on-link length) to interface `ifindex` (RTM_NEWADDR). IPv6
// addresses skip duplicate address detection (IFA_F_NODAD): the gateway answers for them on
// the wire already, so the kernel would never see a conflict, only wait.
std::string add_interface_address(int ifindex, const IpPrefix& prefix);

// Writes `value` to /proc/sys/net/<family>/conf/<name>/<key> ("ipv6", "eth1", "accept_ra").
std::string set_interface_sysctl(const std::string& family, const std::string& name,
                                 const std::string& key, const std::string& value);

}  // namespace meshgate::ctl
