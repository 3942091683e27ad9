// Checks of what a valid config points at outside itself, made before anything starts (by
// --check and by a start alike): the files it names, the devices of its ports; and of the
// command line's output files. Every config error carries the position of the key at fault.
// Main thread.
#pragma once

#include <string>

#include "control/config/config.h"
#include "control/runtime/eal.h"

namespace meshgate::ctl {

// The mesh file (read and parsed: its own errors keep their file:line:column), the PEM files
// and token files of [mesh] and [hbone]: each must be a regular file within its size limit
// (control/common/file_read.h); the [access_log] file must be one that can be created or
// appended to (check_output_file). Appends to `errs`.
void check_referenced_files(const Config& cfg, ConfigErrors* errs);

// Each [[port]] device (control/runtime/devices.h: PCI address present, vdev driver known,
// interfaces it opens present). `replay`: the first port's device is replaced by the pcap
// device and not checked. Appends to `errs`.
void check_devices(const Config& cfg, bool replay, ConfigErrors* errs);

// What a live start needs of the host besides devices: TUN/TAP (/dev/net/tun) for host
// interfaces, the BGP daemon's executable for [bgp]. Appends to `errs`.
void check_host_services(const Config& cfg, ConfigErrors* errs);

// What `cfg` names outside itself, as --check and a start check it: check_referenced_files,
// check_devices (with `devices`) and, unless `replay`, check_host_services; the errors in file
// order. A reload runs the same checks but the devices' (`devices` false): its [[port]]s cannot
// change (restart_only_changes) and the running gateway holds their devices.
ConfigErrors preflight(const Config& cfg, bool replay, bool devices);

// A start's memory (start_memory_need, runtime.h) that does not fit: an error with the figures
// at the key that weighs most (the largest Maglev table's service when the tables are most of
// it, else conntrack.max_flows). Appends to `errs`.
void check_start_memory(const Config& cfg, const MemoryNeed& need, ConfigErrors* errs);

// The key of service `i` to report its table at: its table_size when set, else the service.
std::string table_key(const Config& cfg, size_t i);

// An output file (--pcap-out, --stats-json) can be created or replaced: "" when it can, else
// why not ("directory /x does not exist", "... is read-only").
std::string check_output_file(const std::string& path);

// [admin] listen is a wildcard address (0.0.0.0 or [::]): the API, which has no
// authentication, answers on every interface.
bool admin_listens_on_all_addresses(const Config& cfg);

}  // namespace meshgate::ctl
