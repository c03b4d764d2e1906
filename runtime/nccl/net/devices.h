// The net plugin's devices (nccl_plugins.md §1.3 "getProperties"): one per IPv4 network interface of the host
// that the interface selection keeps, discovered once per process.
//
// Selection (NCCL_SOCKET_IFNAME's syntax, NCCL env docs): BRAID_NET_IF, else NCCL_SOCKET_IFNAME, is a comma
// list of interface-name prefixes; a leading `^` makes it an exclude list; a leading `=` (after `^` if both)
// makes every entry an exact name. Without either variable: every interface that is up except `docker*`,
// `virbr*` and loopback, and loopback when nothing else is left. Interfaces without an IPv4 address are skipped
// (the plugin speaks IPv4 only); an interface with several addresses contributes its first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/net_abi.h"
#include "braid/status.h"

namespace braid::nccl_plugin {

/// Properties the plugin reports for every device, whatever the interface.
inline constexpr int kNetMaxRecvs = 8;                           // maxRecvs: buffers one grouped irecv may carry
inline constexpr int kNetMaxComms = 65536;                       // maxComms
inline constexpr int kNetDefaultSpeedMbps = 10000;               // speed when /sys/class/net/<if>/speed says nothing
inline constexpr size_t kNetMaxTransferBytes = size_t{1} << 30;  // maxP2pBytes / maxCollBytes: fits test()'s int

/// One interface the plugin offers as a device.
struct NetDevice {
  std::string name;      // interface name, "eth0"
  uint32_t ip = 0;       // IPv4 address, network byte order
  std::string pci_path;  // realpath of /sys/class/net/<name>/device, "" for virtual interfaces
  int speed_mbps = kNetDefaultSpeedMbps;
  bool loopback = false;
};

/// A parsed interface selection ("eth,ib", "^docker,lo", "=eth0", "^=lo").
struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
  /// Whether interface `name` passes the filter (an empty include list keeps nothing).
  bool keeps(const std::string& name) const;
};

/// Parses NCCL_SOCKET_IFNAME syntax; empty entries are dropped.
InterfaceFilter parseInterfaceFilter(const std::string& text);

/// A candidate interface as getifaddrs reports it (name, first IPv4 address, flags).
struct InterfaceCandidate {
  std::string name;
  uint32_t ip = 0;
  bool up = true;
  bool loopback = false;
};

/// Applies the selection rules above to `candidates` (in getifaddrs order). `spec` is the selection text
/// ("" = the default rules); `source` names the variable it came from for messages. Errors: kInvalidUsage
/// "<source>=<spec> matches no interface with an IPv4 address (found: ...)".
Result<std::vector<InterfaceCandidate>> selectInterfaces(const std::vector<InterfaceCandidate>& candidates,
                                                         const std::string& spec, const std::string& source);

/// The devices of this process: discovered on the first call (getifaddrs, sysfs), the same list afterwards.
/// Errors: selectInterfaces()'s, kSystemError when getifaddrs fails.
Result<const std::vector<NetDevice>*> netDevices();

/// Fills v11 properties of device `dev` (`name` / `pciPath` point into the device list, valid until exit).
/// Errors: kInvalidArgument for a device index out of range.
Status netProperties(int dev, nccl_abi::NetPropertiesV11* props);

}  // namespace braid::nccl_plugin
