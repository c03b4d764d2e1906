#include "net/devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/env.h"
#include "common/plugin_log.h"
#include "socket/socket.h"

namespace braid::nccl_plugin {
namespace {

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

std::string joinNames(const std::vector<InterfaceCandidate>& candidates) {
  std::string out;
  for (const InterfaceCandidate& c : candidates) {
    if (!out.empty()) out += ", ";
    out += c.name;
  }
  return out.empty() ? "none" : out;
}

// getifaddrs' interfaces with an IPv4 address, first address per name, in the order listed.
Result<std::vector<InterfaceCandidate>> hostInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return Status(StatusCode::kSystemError, "NET/Braid: getifaddrs: " + net::errnoText(errno));
  }
  std::vector<InterfaceCandidate> out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET || it->ifa_name == nullptr) continue;
    const std::string name = it->ifa_name;
    bool seen = false;
    for (const InterfaceCandidate& c : out) seen = seen || c.name == name;
    if (seen) continue;
    InterfaceCandidate c;
    c.name = name;
    c.ip = reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr;
    c.up = (it->ifa_flags & IFF_UP) != 0;
    c.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(c);
  }
  freeifaddrs(list);
  return out;
}

// /sys/class/net/<name>/speed in Mbps, or the default when the file is absent or says -1 / garbage.
int interfaceSpeedMbps(const std::string& name) {
  std::ifstream in("/sys/class/net/" + name + "/speed");
  long speed = -1;
  if (in && (in >> speed) && speed > 0 && speed <= INT_MAX) return static_cast<int>(speed);
  return kNetDefaultSpeedMbps;
}

// The canonical sysfs device folder of a physical interface ("" for virtual ones, which have none).
std::string interfacePciPath(const std::string& name) {
  const std::string link = "/sys/class/net/" + name + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

}  // namespace

bool InterfaceFilter::keeps(const std::string& name) const {
  bool listed = false;
  for (const std::string& entry : names) {
    if (exact ? name == entry : startsWith(name, entry)) listed = true;
  }
  return exclude ? !listed : listed;
}

InterfaceFilter parseInterfaceFilter(const std::string& text) {
  InterfaceFilter filter;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') {
    filter.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    filter.exact = true;
    ++pos;
  }
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string entry = text.substr(pos, comma - pos);
    while (!entry.empty() && entry.front() == ' ') entry.erase(entry.begin());
    while (!entry.empty() && entry.back() == ' ') entry.pop_back();
    if (!entry.empty()) filter.names.push_back(entry);
    pos = comma + 1;
  }
  return filter;
}

Result<std::vector<InterfaceCandidate>> selectInterfaces(const std::vector<InterfaceCandidate>& candidates,
                                                         const std::string& spec, const std::string& source) {
  std::vector<InterfaceCandidate> kept;
  if (!spec.empty()) {
    const InterfaceFilter filter = parseInterfaceFilter(spec);
    for (const InterfaceCandidate& c : candidates)
      if (c.up && filter.keeps(c.name)) kept.push_back(c);
    if (kept.empty()) {
      return Status(StatusCode::kInvalidUsage,
                    "NET/Braid: " + source + "=" + spec +
                        " matches no interface with an IPv4 address that is up (found: " + joinNames(candidates) + ")");
    }
    return kept;
  }
  const InterfaceFilter defaults = parseInterfaceFilter("^docker,virbr");
  for (const InterfaceCandidate& c : candidates)
    if (c.up && !c.loopback && defaults.keeps(c.name)) kept.push_back(c);
  if (kept.empty()) {
    for (const InterfaceCandidate& c : candidates)
      if (c.up && c.loopback) kept.push_back(c);
  }
  if (kept.empty()) {
    return Status(StatusCode::kSystemError,
                  "NET/Braid: no network interface with an IPv4 address is up (found: " + joinNames(candidates) + ")");
  }
  return kept;
}

Result<const std::vector<NetDevice>*> netDevices() {
  static std::mutex mutex;
  static std::vector<NetDevice> devices;
  static bool discovered = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (discovered) return &devices;
  BRAID_ASSIGN_OR_RETURN(std::vector<InterfaceCandidate> candidates, hostInterfaces());
  std::string spec = envString("BRAID_NET_IF");
  std::string source = "BRAID_NET_IF";
  if (spec.empty()) {
    const char* nccl = std::getenv("NCCL_SOCKET_IFNAME");
    if (nccl != nullptr && *nccl != '\0') {
      spec = nccl;
      source = "NCCL_SOCKET_IFNAME";
    }
  }
  BRAID_ASSIGN_OR_RETURN(std::vector<InterfaceCandidate> kept, selectInterfaces(candidates, spec, source));
  for (const InterfaceCandidate& c : kept) {
    NetDevice d;
    d.name = c.name;
    d.ip = c.ip;
    d.loopback = c.loopback;
    d.pci_path = interfacePciPath(c.name);
    d.speed_mbps = interfaceSpeedMbps(c.name);
    BRAID_PLUGIN_LOG(kLogInfo, kSubsysNet, "NET/Braid: device {} {} ({}, {} Mbps{}{})", devices.size(), c.name,
                     net::SocketAddress{c.ip, 0}.toString(), d.speed_mbps, d.pci_path.empty() ? "" : ", ", d.pci_path);
    devices.push_back(std::move(d));
  }
  discovered = true;
  return &devices;
}

Status netProperties(int dev, nccl_abi::NetPropertiesV11* props) {
  BRAID_ASSIGN_OR_RETURN(const std::vector<NetDevice>* devices, netDevices());
  if (props == nullptr) return Status(StatusCode::kInvalidArgument, "getProperties: props is NULL");
  if (dev < 0 || dev >= static_cast<int>(devices->size())) {
    return Status(StatusCode::kInvalidArgument, "getProperties: device " + std::to_string(dev) + " out of range (" +
                                                    std::to_string(devices->size()) + " devices)");
  }
  const NetDevice& d = (*devices)[dev];
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pci_path.empty() ? nullptr : const_cast<char*>(d.pci_path.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = nccl_abi::kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = kNetMaxComms;
  props->maxRecvs = kNetMaxRecvs;
  props->netDeviceType = nccl_abi::kNetDeviceHost;
  props->netDeviceVersion = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = kNetMaxTransferBytes;
  props->maxCollBytes = kNetMaxTransferBytes;
  props->maxMultiRequestSize = 1;
  return Status::ok();
}

}  // namespace braid::nccl_plugin
