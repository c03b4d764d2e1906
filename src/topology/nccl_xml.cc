// NCCL topology XML importer: full dumps (NCCL_TOPO_DUMP_FILE) and PCI-only hint files (NCCL_TOPO_FILE).
//
// Element and attribute meanings follow ../shared/reference/nccl_plugins.md §5.2; link bandwidths follow
// NCCL's constants (§4.5, nccl@2.28.9 src/graph/topo.h and topo.cc):
//   NVLink  count × per-lane GB/s by SM (SM60 18, SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1);
//   PCIe    link_width × per-lane rate / 80 GB/s, per-lane rate in 100 Mb/s units from link_speed
//           (2.5 GT/s 15, 5 GT/s 30, 8 GT/s 60, 16 GT/s 120, 32 GT/s 240, 64 GT/s 480); width 0 ⇒ 16;
//           an unknown speed falls back to 60 (Gen3), as NCCL's kvDictPciGen does;
//   NET     speed (Mb/s) / 8000 GB/s, speed ≤ 0 ⇒ 10000 Mb/s;
//   SYS     inter-socket bandwidth by CPU: Intel model ≥ 0xCF 40 (ERP), ≥ 0x8F 22 (SRP), ≥ 0x55 10 (SKL),
//           else 6 (BDW); AMD 16; POWER9 32; ARM 6.
// GPU ranks: a full dump's <gpu rank>; a hint file has no <gpu> elements, so its GPUs (<pci class="0x03....">) are
// ranked by PCI bus id (domain, bus, device, function, numerically), the order of CUDA_DEVICE_ORDER=PCI_BUS_ID,
// nvidia-smi and launchers; its NICs (class 0x02....) are numbered nic0.. the same way. Duplicate attributes are
// rejected (not well-formed XML) with file, line, element and attribute.
// Per-link latencies (µs) split NCCL's LL hardware latencies (§4.2: NVLink 0.6, PCI 1.0, NET 2.7) evenly over
// the two hops of a typical path (GPU-switch-GPU), so a whole path costs what NCCL charges for it.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <vector>

#include "braid/importers.h"
#include "common/xml_util.h"

namespace braid {

namespace {

constexpr double kNvlinkDirectAlphaUs = 0.6;  // one direct GPU-GPU NVLink hop
constexpr double kNvswitchHopAlphaUs = 0.3;   // GPU-NVSwitch hop (two per GPU-GPU path)
constexpr double kPcieHopAlphaUs = 0.5;       // one PCIe hop (two per GPU-switch-GPU path)
constexpr double kSysAlphaUs = 1.0;           // one inter-socket hop
constexpr double kNetHopAlphaUs = 1.35;       // NIC-switch hop (two per NIC-NIC path = NCCL's 2.7)
constexpr int kDefaultPcieRate = 60;          // NCCL fallback: 8 GT/s (Gen3) per lane, 100 Mb/s units
constexpr int kDefaultNetSpeedMbps = 10000;   // NCCL: net speed <= 0 means 10 Gb/s
constexpr long long kMaxNumaId = 1 << 20;     // the largest numa the Braid YAML reads back

// Notes grouped by kind so that a repeated oddity (four self-loops) gives one sentence listing every case.
class NoteList {
 public:
  void add(const std::string& key, const std::string& item = "") {
    auto it = index_.find(key);
    if (it == index_.end()) {
      index_[key] = entries_.size();
      entries_.push_back({key, {}});
      it = index_.find(key);
    }
    if (!item.empty()) entries_[it->second].second.push_back(item);
  }
  void emit(std::vector<std::string>& out) const {
    for (const auto& [key, items] : entries_) {
      if (items.empty()) {
        out.push_back(key);
        continue;
      }
      std::string joined;
      for (size_t i = 0; i < items.size(); ++i) joined += (i ? ", " : "") + items[i];
      out.push_back(fmt::format("{} ({})", key, joined));
    }
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::vector<std::string>>> entries_;
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Decimal or 0x-prefixed hexadecimal integer, surrounding spaces allowed. nullopt when malformed.
std::optional<long long> parseInteger(const std::string& raw) {
  const std::string s = trim(raw);
  if (s.empty()) return std::nullopt;
  size_t pos = 0;
  bool negative = false;
  if (s[pos] == '-' || s[pos] == '+') negative = s[pos++] == '-';
  int base = 10;
  if (s.size() > pos + 1 && s[pos] == '0' && (s[pos + 1] == 'x' || s[pos + 1] == 'X')) {
    base = 16;
    pos += 2;
  }
  if (pos >= s.size()) return std::nullopt;
  long long value = 0;
  for (; pos < s.size(); ++pos) {
    const int c = std::tolower(static_cast<unsigned char>(s[pos]));
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    if (digit >= base) return std::nullopt;
    if (value > (INT64_MAX - digit) / base) return std::nullopt;  // overflow
    value = value * base + digit;
  }
  return negative ? -value : value;
}

// Leading decimal number of a string ("16.0 GT/s PCIe" -> 16.0). nullopt when it does not start with one.
std::optional<double> leadingNumber(const std::string& raw, std::string* rest = nullptr) {
  const std::string s = trim(raw);
  size_t pos = 0;
  bool digits = false;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos, digits = true;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos, digits = true;
  }
  if (!digits) return std::nullopt;
  if (rest) *rest = trim(s.substr(pos));
  return std::strtod(s.substr(0, pos).c_str(), nullptr);
}

// NCCL's NVLink per-lane bandwidth by compute capability (nccl@2.28.9 src/graph/topo.h ncclTopoNVLinkBw).
double nvlinkLaneGbps(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

// Bus ids compare case-insensitively and with the PCI domain padded to 8 hex digits, so "0000:0f:00.0",
// "0f:00.0" and "0000:0F:00.0" name the same device.
std::string normalizeBusId(const std::string& raw) {
  std::string s = lower(trim(raw));
  const size_t colons = static_cast<size_t>(std::count(s.begin(), s.end(), ':'));
  if (colons == 1) s = "0000:" + s;
  const size_t first = s.find(':');
  if (first != std::string::npos && first < 8) s = std::string(8 - first, '0') + s;
  return s;
}

// Numeric PCI address (domain, bus, device, function) of a bus id "dddd:bb:dd.f" or "bb:dd.f" (hex fields).
// nullopt when the id is empty or malformed.
std::optional<std::array<unsigned long long, 4>> parseBusId(const std::string& raw) {
  const std::string s = lower(trim(raw));
  std::array<unsigned long long, 4> out{0, 0, 0, 0};
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ':' || s[i] == '.') {
      fields.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  // "dddd:bb:dd.f" gives 4 fields, "bb:dd.f" 3; the last separator must be '.' and the others ':'.
  const size_t dot = s.rfind('.');
  if ((fields.size() != 4 && fields.size() != 3) || dot == std::string::npos || s.find(':', dot) != std::string::npos ||
      std::count(s.begin(), s.end(), '.') != 1) {
    return std::nullopt;
  }
  const size_t first = 4 - fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (f.empty() || f.size() > 8) return std::nullopt;
    for (char c : f) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    out[first + i] = std::stoull(f, nullptr, 16);
  }
  return out;
}

// Orders hint-file devices as CUDA (CUDA_DEVICE_ORDER=PCI_BUS_ID), nvidia-smi and launchers number them: by PCI
// domain, bus, device and function; devices whose bus id is missing or unreadable follow in document order.
// Returns how many had no readable bus id.
template <typename Item>
int sortByBusId(std::vector<Item*>& items) {
  int unreadable = 0;
  std::vector<std::pair<std::optional<std::array<unsigned long long, 4>>, Item*>> keyed;
  for (Item* item : items) {
    keyed.emplace_back(parseBusId(item->raw_busid), item);
    if (!keyed.back().first) ++unreadable;
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (a.first.has_value() != b.first.has_value()) return a.first.has_value();
    return a.first.has_value() && *a.first < *b.first;
  });
  for (size_t i = 0; i < items.size(); ++i) items[i] = keyed[i].second;
  return unreadable;
}

// GPU product names for PCI device ids (NVIDIA, pci.ids): those in the corpus (../shared/realcases/README.md §1)
// plus the SXM parts of the machines the shipped topologies model.
std::string gpuModelFromDevice(long long device, int sm) {
  switch (device) {
    case 0x1db1: return "V100-SXM2-16GB";
    case 0x1db5: return "V100-SXM2-32GB";
    case 0x1db8: return "V100-SXM3-32GB";
    case 0x20b0: return "A100-SXM4-40GB";
    case 0x20b2: return "A100-SXM4-80GB";
    case 0x20b5: return "A100-PCIE-80GB";
    case 0x20b7: return "A30";
    case 0x20f1: return "A100-PCIE-40GB";
    case 0x2235: return "A40";
    case 0x2236: return "A10";
    case 0x2237: return "A10G";
    case 0x2330: return "H100-SXM5-80GB";
    case 0x2331: return "H100-PCIE";
    case 0x2335: return "H200-SXM-141GB";
    case 0x2329: return "H20";
    case 0x2324: return "H800";
    case 0x26b5: return "L40";
    case 0x26b9: return "L40S";
    case 0x27b8: return "L4";
    case 0x26ba: return "L20";
    case 0x2684: return "RTX-4090";
    case 0x2204: return "RTX-3090";
    case 0x2230: return "RTX-A6000";
    default: break;
  }
  return sm > 0 ? fmt::format("sm{}", sm) : std::string();
}

// Shipped topology whose NVLink graph matches GPUs of this PCI device id; empty when none does (PCIe cards, H800
// with 8 NVLinks, unknown ids). topologies/README.md describes the models.
std::string nvlinkModelForDevice(long long device) {
  switch (device) {
    case 0x1db1:  // V100-SXM2: DGX-1 hybrid cube-mesh
    case 0x1db5: return "topologies/dgx1-v100.yaml or topologies/ndv2-x1.yaml";
    case 0x1db8: return "topologies/dgx2-x1.yaml";  // V100-SXM3: DGX-2 NVSwitch
    case 0x20b0:
    case 0x20b2: return "topologies/dgx-a100-x1.yaml";  // A100-SXM4: NVSwitch, 12 NVLinks
    case 0x2330: return "topologies/dgx-h100-x1.yaml";  // H100-SXM5: NVSwitch, 18 NVLinks
    default: return "";
  }
}

// PCI device ids of PCIe cards (no NVLink, or at most a 2-GPU bridge) in generations that also have SXM parts.
bool isPcieCardDevice(long long device) {
  switch (device) {
    case 0x20b5:  // A100-PCIE-80GB
    case 0x20b7:  // A30
    case 0x20f1:  // A100-PCIE-40GB
    case 0x2331:  // H100-PCIE
      return true;
    default: return false;
  }
}

// Shipped topology whose NVLink graph matches GPUs of compute capability `sm` (a full dump without PCI device ids);
// empty when none does.
std::string nvlinkModelForSm(int sm) {
  switch (sm) {
    case 80: return "topologies/dgx-a100-x1.yaml (A100 SXM4: 12 NVLinks to NVSwitch)";
    case 90: return "topologies/dgx-h100-x1.yaml (H100/H200 SXM: 18 NVLinks to NVSwitch; an H800 has 8)";
    default: return "";
  }
}

bool looksVirtualNetName(const std::string& name) {
  static const char* const kPrefixes[] = {"veth", "br-",     "docker", "virbr", "lo",
                                          "cni",  "flannel", "cali",   "tun",   "tap"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

struct NvlinkInfo {
  int line = 0;
  std::string target;  // normalized bus id
  std::string raw_target;
  int count = 0;
  long long tclass = -1;  // -1: not given
};

struct C2cInfo {
  int line = 0;
  double gbps = 0;
  int count = 0;
};

struct GpuInfo {
  int line = 0;
  long long rank = -1;
  int sm = 0;  // 0: unknown
  bool gdr = true;
  int nvlink_elements = 0;  // <nvlink> children as written, ignored ones included
  std::vector<NvlinkInfo> nvlinks;
  std::vector<C2cInfo> c2c;
};

struct NetInfo {
  int line = 0;
  std::string name;
  double gbps = 0;  // 0: unknown (hint NIC)
  double latency_us = 0;
  bool from_hint = false;
};

// A hint-file NIC waiting to be added once every NIC's bus id is known.
struct PendingNic {
  const NetInfo* net = nullptr;
  std::string raw_busid;
  int parent = -1;
  double up_gbps = 0;
  int numa = -1;
};

enum class ItemKind { kBridge, kGpu, kNic, kOther };

struct PciItem {
  int line = 0;
  std::string busid;      // normalized
  std::string raw_busid;  // as written
  ItemKind kind = ItemKind::kOther;
  double up_gbps = 0;  // PCIe link to the parent
  int pcie_rate = 0;   // per-lane rate of that link, 100 Mb/s units (NCCL's: 240 = 32 GT/s)
  int pcie_width = 0;  // its lanes
  std::string model;
  long long device = -1;  // PCI device id, -1 when not given
  bool has_gpu_element = false;
  GpuInfo gpu;
  std::vector<NetInfo> nets;
  std::vector<PciItem> children;
  bool useful = false;  // subtree holds a GPU or a NIC that becomes a vertex
};

struct CpuItem {
  int line = 0;
  long long numa = -1;
  double sys_gbps = 10;
  std::vector<PciItem> children;
  std::vector<NetInfo> bare_nets;  // <nic> directly under <cpu>: no PCI parent
};

class XmlImporter {
 public:
  XmlImporter(const std::string& text, const std::string& filename) : text_(text), filename_(filename), lines_(text) {}

  Result<Topology> run() {
    pugi::xml_document doc;
    const pugi::xml_parse_result parsed = doc.load_buffer(text_.data(), text_.size(), pugi::parse_default);
    if (!parsed) {
      if (std::optional<std::string> open = unclosedAtEnd(parsed)) {
        const size_t end = text_.find_last_not_of(" \t\r\n");
        return parseError(filename_, lines_.line(static_cast<std::ptrdiff_t>(end == std::string::npos ? 0 : end)),
                          "xml", fmt::format("unexpected end of file ({}): the file looks truncated", *open));
      }
      if (parsed.status == pugi::status_bad_comment) {
        // A comment that never closes: named by the line that opens it.
        const size_t open = text_.rfind("<!--", static_cast<size_t>(std::max<std::ptrdiff_t>(parsed.offset, 0)));
        if (open != std::string::npos && text_.find("-->", open + 4) == std::string::npos) {
          return parseError(filename_, lines_.line(static_cast<std::ptrdiff_t>(open)), "xml",
                            "unexpected end of file inside a comment opened here: the file looks truncated");
        }
      }
      return parseError(filename_, lines_.line(parsed.offset), "xml",
                        fmt::format("malformed XML: {}", parsed.description()));
    }
    BRAID_RETURN_IF_ERROR(rejectDuplicateAttributes(doc));
    const pugi::xml_node root = doc.document_element();
    if (!root) return parseError(filename_, 0, "system", "no root element: expected <system version=\"1\">");
    const std::string root_name = root.name();
    if (root_name == "graphs") {
      return parseError(filename_, lineOf(root), "graphs",
                        "NCCL graph file (NCCL_GRAPH_FILE), not a topology: it pins ring/tree channel orders for "
                        "NCCL's search; give the matching topology XML (<system>) instead");
    }
    if (root_name != "system") {
      return parseError(
          filename_, lineOf(root), root_name,
          fmt::format("root element <{}> is not an NCCL topology: expected <system version=\"1\">", root_name));
    }
    const pugi::xml_attribute version = root.attribute("version");
    if (!version) {
      notes_.add("<system> has no version attribute; read as version 1");
    } else {
      auto v = parseInteger(version.value());
      if (!v || *v != 1) {
        return parseError(filename_, lineOf(root), "version",
                          fmt::format("unsupported topology XML version '{}' (NCCL reads version 1)", version.value()));
      }
    }

    for (pugi::xml_node child : root.children()) {
      if (child.type() != pugi::node_element) continue;
      if (std::string(child.name()) != "cpu") {
        notes_.add("elements other than <cpu> under <system> ignored",
                   fmt::format("<{}> line {}", child.name(), lineOf(child)));
        continue;
      }
      CpuItem cpu;
      BRAID_RETURN_IF_ERROR(readCpu(child, cpu));
      cpus_.push_back(std::move(cpu));
    }
    if (cpus_.empty()) return parseError(filename_, lineOf(root), "cpu", "no <cpu> element: the topology is empty");

    // Full dump when any <gpu> element exists; otherwise a hint file whose GPUs are pci class 0x03....
    for (CpuItem& cpu : cpus_) {
      for (PciItem& item : cpu.children) collectGpus(item);
    }
    if (full_gpus_.empty() && !rankless_gpus_.empty()) {
      rankless_mode_ = true;
      full_gpus_ = rankless_gpus_;
      rankless_gpus_.clear();
    }
    hint_mode_ = full_gpus_.empty();
    if (hint_mode_) {
      for (CpuItem& cpu : cpus_) {
        for (PciItem& item : cpu.children) collectHintGpus(item);
      }
    }
    if (full_gpus_.empty() && hint_gpus_.empty()) {
      const int line = first_classless_line_ > 0 ? first_classless_line_ : lineOf(root);
      return parseError(filename_, line, first_classless_line_ > 0 ? "class" : "gpu",
                        "no GPU found: no <gpu> element and no <pci> with a GPU class (0x03....); this hint file "
                        "only places PCI devices for NCCL_TOPO_FILE and must be merged with detected GPUs");
    }
    for (CpuItem& cpu : cpus_) {
      for (PciItem& item : cpu.children) markUseful(item);
    }
    return build();
  }

 private:
  int lineOf(const pugi::xml_node& node) const { return lines_.line(node.offset_debug()); }

  // When the parse failed in the input's last tag (or after it) with elements still open, the file was cut short:
  // "unclosed <system> from line 1, innermost <gpu> from line 4". nullopt otherwise, and when the last tag is an
  // end tag that closes the wrong element (a mismatch, not a truncation). The open elements come from a scan of the
  // tags that skips comments, processing instructions, CDATA, declarations and quoted attribute values.
  std::optional<std::string> unclosedAtEnd(const pugi::xml_parse_result& parsed) const {
    std::vector<std::pair<std::string, size_t>> open;  // element name, offset of its '<'
    size_t last_tag = 0;
    bool last_mismatched = false;
    size_t i = 0;
    auto skipPast = [&](const char* end) {
      const size_t at = text_.find(end, i);
      i = at == std::string::npos ? text_.size() : at + std::char_traits<char>::length(end);
    };
    while ((i = text_.find('<', i)) != std::string::npos) {
      const size_t start = i;
      last_tag = start;
      last_mismatched = false;
      if (text_.compare(i, 4, "<!--") == 0) {
        skipPast("-->");
      } else if (text_.compare(i, 9, "<![CDATA[") == 0) {
        skipPast("]]>");
      } else if (text_.compare(i, 2, "<?") == 0) {
        skipPast("?>");
      } else if (text_.compare(i, 2, "<!") == 0) {
        skipPast(">");
      } else {
        const bool closing = i + 1 < text_.size() && text_[i + 1] == '/';
        size_t j = i + (closing ? 2 : 1);
        const size_t name_start = j;
        while (j < text_.size() && !std::isspace(static_cast<unsigned char>(text_[j])) && text_[j] != '>' &&
               text_[j] != '/')
          ++j;
        const std::string name = text_.substr(name_start, j - name_start);
        char quote = 0;
        bool self_closing = false;
        for (; j < text_.size(); ++j) {
          const char c = text_[j];
          if (quote) {
            if (c == quote) quote = 0;
          } else if (c == '"' || c == '\'') {
            quote = c;
          } else if (c == '>') {
            self_closing = j > 0 && text_[j - 1] == '/';
            break;
          }
        }
        if (j >= text_.size()) {  // the tag itself is cut short: it is open too
          if (!closing && !name.empty()) open.emplace_back(name, start);
          break;
        }
        i = j + 1;
        if (closing) {
          if (!open.empty() && open.back().first == name) {
            open.pop_back();
          } else {
            last_mismatched = true;
          }
        } else if (!self_closing && !name.empty()) {
          open.emplace_back(name, start);
        }
      }
    }
    if (open.empty() || last_mismatched || parsed.offset < static_cast<std::ptrdiff_t>(last_tag)) return std::nullopt;
    std::string what = fmt::format("unclosed <{}> from line {}", open.front().first,
                                   lines_.line(static_cast<std::ptrdiff_t>(open.front().second)));
    if (open.size() > 1) {
      what += fmt::format(", innermost <{}> from line {}", open.back().first,
                          lines_.line(static_cast<std::ptrdiff_t>(open.back().second)));
    }
    return what;
  }

  // Every element of the document, in document order: the first attribute name that appears twice is an error
  // naming the file, the line of its second occurrence, the element and the attribute.
  Status rejectDuplicateAttributes(const pugi::xml_document& doc) const {
    std::optional<DuplicateAttribute> d = findDuplicateAttribute(doc, text_, lines_);
    if (!d) return Status::ok();
    return parseError(filename_, d->line, d->attribute,
                      fmt::format("<{}> has attribute '{}' twice (\"{}\" and \"{}\"): duplicate attributes make the "
                                  "XML not well-formed",
                                  d->element.name(), d->attribute, d->first_value, d->second_value));
  }

  Status integerAttr(const pugi::xml_node& node, const char* attr, long long* out) const {
    auto v = parseInteger(node.attribute(attr).value());
    if (!v) {
      return parseError(
          filename_, lineOf(node), attr,
          fmt::format("<{}> {}=\"{}\" is not an integer", node.name(), attr, node.attribute(attr).value()));
    }
    *out = *v;
    return Status::ok();
  }

  double sysBandwidth(const pugi::xml_node& cpu) {
    const std::string arch = lower(cpu.attribute("arch").value());
    const std::string vendor = cpu.attribute("vendor").value();
    if (arch.rfind("ppc", 0) == 0) return 32;
    if (arch == "arm64" || arch == "aarch64") return 6;
    if (vendor == "AuthenticAMD") return 16;
    if (vendor == "GenuineIntel") {
      auto model = parseInteger(cpu.attribute("modelid").value());
      if (!model) {
        notes_.add("Intel CPU without a readable modelid: inter-socket bandwidth assumed 10 GB/s (Skylake class)",
                   fmt::format("line {}", lineOf(cpu)));
        return 10;
      }
      if (*model >= 0xCF) return 40;
      if (*model >= 0x8F) return 22;
      if (*model >= 0x55) return 10;
      return 6;
    }
    notes_.add("CPU vendor/arch unknown: inter-socket (SYS) bandwidth assumed 10 GB/s (NCCL's Skylake value)",
               fmt::format("line {}", lineOf(cpu)));
    return 10;
  }

  // PCIe bandwidth of the link above `node` from its link_speed and link_width attributes.
  double pcieBandwidth(const pugi::xml_node& node, int* rate_out = nullptr, int* width_out = nullptr) {
    const std::string where = fmt::format("line {}", lineOf(node));
    const pugi::xml_attribute speed_attr = node.attribute("link_speed");
    const pugi::xml_attribute width_attr = node.attribute("link_width");
    int rate = kDefaultPcieRate;
    if (!speed_attr || trim(speed_attr.value()).empty()) {
      notes_.add("PCIe link_speed missing or empty: assumed 8 GT/s (NCCL's Gen3 fallback)", where);
    } else {
      std::string rest;
      auto gts = leadingNumber(speed_attr.value(), &rest);
      const std::string unit = lower(rest);
      const bool standard_unit = unit == "gt/s" || unit == "gt/s pcie";
      if (!gts) {
        notes_.add("PCIe link_speed unreadable: assumed 8 GT/s (NCCL's Gen3 fallback)",
                   fmt::format("'{}' at {}", speed_attr.value(), where));
      } else {
        static const std::pair<double, int> kRates[] = {{2.5, 15}, {5, 30}, {8, 60}, {16, 120}, {32, 240}, {64, 480}};
        bool found = false;
        for (auto [g, r] : kRates) {
          if (*gts > g - 0.01 && *gts < g + 0.01) rate = r, found = true;
        }
        if (!found) {
          notes_.add("PCIe link_speed is not a PCIe generation rate: assumed 8 GT/s (NCCL's Gen3 fallback)",
                     fmt::format("'{}' at {}", speed_attr.value(), where));
        } else if (!standard_unit) {
          notes_.add("PCIe link_speed with a malformed unit read by its number (NCCL itself would fall back to Gen3)",
                     fmt::format("'{}' at {}", speed_attr.value(), where));
        }
      }
    }
    int width = 16;
    if (!width_attr || trim(width_attr.value()).empty()) {
      if (width_attr) notes_.add("PCIe link_width empty: assumed x16", where);
    } else {
      auto w = parseInteger(width_attr.value());
      if (!w || *w < 0 || *w > 64) {
        notes_.add("PCIe link_width unreadable: assumed x16", fmt::format("'{}' at {}", width_attr.value(), where));
      } else if (*w == 0) {
        notes_.add("PCIe link_width 0 read as x16 (NCCL: width 0 means 16)", where);
      } else {
        width = static_cast<int>(*w);
      }
    }
    if (rate_out) *rate_out = rate;
    if (width_out) *width_out = width;
    return width * rate / 80.0;
  }

  // The GT/s of one of NCCL's per-lane rates (pcieBandwidth's table: 2.5 GT/s 15 ... 64 GT/s 480).
  static std::string gtsOf(int rate) { return fmt::format("{:g} GT/s", rate <= 30 ? rate / 6.0 : rate / 7.5); }

  // A bridge whose own link is x1/x2 at Gen1-2 (at most 0.5 GB/s) above a faster device is a VM's emulated bridge
  // (QEMU's root ports report 2.5 GT/s x1): its link is read as the widest link below it.
  void checkBridgeLink(PciItem& item) {
    double widest = 0;
    for (const PciItem& child : item.children) widest = std::max(widest, child.up_gbps);
    if (item.up_gbps > 0.5 || widest <= item.up_gbps) return;
    notes_.add(
        fmt::format("{}:{}: PCIe bridge {} reports {} x{} ({:.3g} GB/s), slower than the devices below it: "
                    "read as a VM's emulated bridge, its link taken as {:g} GB/s (the widest below it)",
                    filename_, item.line, item.raw_busid.empty() ? "?" : item.raw_busid, gtsOf(item.pcie_rate),
                    item.pcie_width, item.up_gbps, widest));
    item.up_gbps = widest;
  }

  // A GPU's PCIe link checked against its generation's (by sm or model: sm60-75 Gen3, sm80-89 Gen4, sm90+ Gen5):
  // a faster rate is capped at the generation's; a link of at most 0.5 GB/s (Gen1-2 x1, a VM's emulation or a
  // link trained down) is read at the generation's rate x16. Unknown generations keep the file's value, with a
  // note when it is that slow.
  void checkGpuLink(PciItem& item) {
    const int sm = item.gpu.sm > 0 ? item.gpu.sm : gpuComputeCapability(item.model).value_or(0);
    const int max_rate = sm >= 90 ? 240 : sm >= 80 ? 120 : sm >= 60 ? 60 : 0;
    const std::string what = item.model.empty() ? std::string("GPU") : item.model;
    const std::string gen = max_rate == 240 ? "Gen5" : max_rate == 120 ? "Gen4" : "Gen3";
    if (max_rate > 0 && item.pcie_rate > max_rate) {
      const double used = item.pcie_width * max_rate / 80.0;
      notes_.add(
          fmt::format("{}:{}: PCIe link_speed {} is beyond the PCIe {} ({}) of a {}: read as {} x{} "
                      "({:g} GB/s)",
                      filename_, item.line, gtsOf(item.pcie_rate), gen, gtsOf(max_rate), what, gtsOf(max_rate),
                      item.pcie_width, used));
      item.pcie_rate = max_rate;
      item.up_gbps = used;
    }
    if (item.up_gbps > 0.5) return;
    if (max_rate > 0) {
      const double used = 16 * max_rate / 80.0;
      notes_.add(
          fmt::format("{}:{}: {} PCIe link {} x{} ({:.3g} GB/s) is a VM's emulated or a downtrained link: "
                      "read as PCIe {} x16 ({:g} GB/s)",
                      filename_, item.line, what, gtsOf(item.pcie_rate), item.pcie_width, item.up_gbps, gen, used));
      item.up_gbps = used;
    } else {
      notes_.add(
          fmt::format("{}:{}: GPU PCIe link {} x{} ({:.3g} GB/s) is unusually slow (a VM's emulation?): "
                      "used as given",
                      filename_, item.line, gtsOf(item.pcie_rate), item.pcie_width, item.up_gbps));
    }
  }

  Status readCpu(const pugi::xml_node& node, CpuItem& cpu) {
    cpu.line = lineOf(node);
    if (node.attribute("numaid")) {
      BRAID_RETURN_IF_ERROR(integerAttr(node, "numaid", &cpu.numa));
      if (cpu.numa < 0 || cpu.numa > kMaxNumaId) {
        notes_.add(fmt::format("{}:{}: <cpu> numaid {} is {}: numbered by position", filename_, cpu.line, cpu.numa,
                               cpu.numa < 0 ? "negative (the kernel reported no NUMA node)"
                                            : fmt::format("out of range (0..{})", kMaxNumaId)));
        cpu.numa = -1;
      }
    } else {
      notes_.add("<cpu> without numaid: numbered by position", fmt::format("line {}", cpu.line));
    }
    cpu.sys_gbps = sysBandwidth(node);
    for (pugi::xml_node child : node.children()) {
      if (child.type() != pugi::node_element) continue;
      const std::string name = child.name();
      if (name == "pci") {
        PciItem item;
        BRAID_RETURN_IF_ERROR(readPci(child, item, 1));
        cpu.children.push_back(std::move(item));
      } else if (name == "nic") {
        BRAID_RETURN_IF_ERROR(readNets(child, cpu.bare_nets));
      } else {
        notes_.add("unknown elements ignored", fmt::format("<{}> line {}", name, lineOf(child)));
      }
    }
    return Status::ok();
  }

  Status readNets(const pugi::xml_node& nic, std::vector<NetInfo>& out) {
    for (pugi::xml_node net : nic.children()) {
      if (net.type() != pugi::node_element) continue;
      if (std::string(net.name()) != "net") {
        notes_.add("unknown elements ignored", fmt::format("<{}> line {}", net.name(), lineOf(net)));
        continue;
      }
      NetInfo info;
      info.line = lineOf(net);
      info.name = net.attribute("name").value();
      if (!net.attribute("dev")) {
        notes_.add("<net> without dev ignored (NCCL ignores it too)", fmt::format("line {}", info.line));
        continue;
      }
      long long dev = 0;
      BRAID_RETURN_IF_ERROR(integerAttr(net, "dev", &dev));
      long long speed = 0;
      const pugi::xml_attribute speed_attr = net.attribute("speed");
      if (speed_attr && !trim(speed_attr.value()).empty()) BRAID_RETURN_IF_ERROR(integerAttr(net, "speed", &speed));
      if (speed <= 0) {
        notes_.add("<net> speed missing or <= 0: assumed 10000 Mb/s (NCCL's default)",
                   fmt::format("line {}", info.line));
        speed = kDefaultNetSpeedMbps;
      }
      info.gbps = static_cast<double>(speed) / 8000.0;
      auto latency = leadingNumber(net.attribute("latency").value());
      info.latency_us = latency ? *latency : 0.0;
      if (info.name.empty()) info.name = fmt::format("net{}", dev);
      out.push_back(std::move(info));
    }
    return Status::ok();
  }

  Status readGpu(const pugi::xml_node& node, PciItem& item) {
    GpuInfo& gpu = item.gpu;
    gpu.line = lineOf(node);
    if (node.attribute("rank")) {
      BRAID_RETURN_IF_ERROR(integerAttr(node, "rank", &gpu.rank));
      if (gpu.rank < 0) return parseError(filename_, gpu.line, "rank", fmt::format("rank {} is negative", gpu.rank));
    }
    if (node.attribute("sm")) {
      long long sm = 0;
      BRAID_RETURN_IF_ERROR(integerAttr(node, "sm", &sm));
      if (sm < 10 || sm > 1000)
        return parseError(filename_, gpu.line, "sm", fmt::format("sm {} is not a compute capability", sm));
      gpu.sm = static_cast<int>(sm);
    } else {
      notes_.add("<gpu> without sm: NVLink lane bandwidth assumed 20 GB/s (SM80)", fmt::format("line {}", gpu.line));
    }
    if (node.attribute("gdr")) {
      auto g = parseInteger(node.attribute("gdr").value());
      gpu.gdr = !g || *g != 0;
    }
    for (pugi::xml_node child : node.children()) {
      if (child.type() != pugi::node_element) continue;
      const std::string name = child.name();
      if (name == "nvlink") {
        ++gpu.nvlink_elements;
        NvlinkInfo link;
        link.line = lineOf(child);
        link.raw_target = child.attribute("target").value();
        link.target = normalizeBusId(link.raw_target);
        if (link.raw_target.empty()) {
          return parseError(filename_, link.line, "target", "<nvlink> has no target bus id");
        }
        long long count = 0;
        if (!child.attribute("count")) {
          notes_.add("<nvlink> without count read as 1 link", fmt::format("line {}", link.line));
          count = 1;
        } else {
          BRAID_RETURN_IF_ERROR(integerAttr(child, "count", &count));
        }
        if (count <= 0 || count > 1024) {
          notes_.add("<nvlink> with a count outside 1..1024 ignored",
                     fmt::format("count {} at line {}", count, link.line));
          continue;
        }
        link.count = static_cast<int>(count);
        if (child.attribute("tclass")) BRAID_RETURN_IF_ERROR(integerAttr(child, "tclass", &link.tclass));
        gpu.nvlinks.push_back(std::move(link));
      } else if (name == "c2c") {
        C2cInfo c2c;
        c2c.line = lineOf(child);
        long long count = 0, bw = 0;
        BRAID_RETURN_IF_ERROR(integerAttr(child, "count", &count));
        BRAID_RETURN_IF_ERROR(integerAttr(child, "bw", &bw));
        if (count <= 0 || bw <= 0) {
          notes_.add("<c2c> with count or bw <= 0 ignored", fmt::format("line {}", c2c.line));
          continue;
        }
        c2c.count = static_cast<int>(std::min<long long>(count, 1024));
        c2c.gbps = static_cast<double>(bw) * static_cast<double>(c2c.count) / 1000.0;  // bw is MB/s per link
        gpu.c2c.push_back(c2c);
      } else {
        notes_.add("unknown elements ignored", fmt::format("<{}> line {}", name, lineOf(child)));
      }
    }
    item.has_gpu_element = true;
    return Status::ok();
  }

  Status readPci(const pugi::xml_node& node, PciItem& item, int depth) {
    if (depth > 64) return parseError(filename_, lineOf(node), "pci", "PCI tree deeper than 64 levels");
    item.line = lineOf(node);
    item.raw_busid = node.attribute("busid").value();
    item.busid = normalizeBusId(item.raw_busid);
    if (item.raw_busid.empty()) notes_.add("<pci> without busid", fmt::format("line {}", item.line));
    if (lower(item.raw_busid).rfind("ffff:ff:", 0) == 0) {
      notes_.add("virtual PCI switch bus ids (ffff:ff:..) accepted as they are", item.raw_busid);
    }
    item.up_gbps = pcieBandwidth(node, &item.pcie_rate, &item.pcie_width);
    const pugi::xml_attribute vendor = node.attribute("vendor");
    if (vendor && parseInteger(vendor.value()).value_or(-1) == 0) {
      notes_.add("PCI vendor id 0x0000 accepted (virtual device)", fmt::format("line {}", item.line));
    }
    long long device = -1;
    if (node.attribute("device")) device = parseInteger(node.attribute("device").value()).value_or(-1);

    bool has_gpu = false, has_nic = false, has_pci = false;
    for (pugi::xml_node child : node.children()) {
      if (child.type() != pugi::node_element) continue;
      const std::string name = child.name();
      if (name == "gpu") {
        if (has_gpu) return parseError(filename_, lineOf(child), "gpu", "two <gpu> elements under one <pci>");
        has_gpu = true;
        BRAID_RETURN_IF_ERROR(readGpu(child, item));
      } else if (name == "nic") {
        has_nic = true;
        BRAID_RETURN_IF_ERROR(readNets(child, item.nets));
      } else if (name == "pci") {
        has_pci = true;
        PciItem sub;
        BRAID_RETURN_IF_ERROR(readPci(child, sub, depth + 1));
        item.children.push_back(std::move(sub));
      } else if (name == "pcilink") {
        notes_.add("<pcilink> extra PCI peer links ignored", fmt::format("line {}", lineOf(child)));
      } else {
        notes_.add("unknown elements ignored", fmt::format("<{}> line {}", name, lineOf(child)));
      }
    }

    long long cls = -1;
    const pugi::xml_attribute class_attr = node.attribute("class");
    if (class_attr) {
      auto c = parseInteger(class_attr.value());
      if (!c) {
        return parseError(filename_, item.line, "class",
                          fmt::format("<pci> class=\"{}\" is not a hex number", class_attr.value()));
      }
      cls = *c;
    }
    if (has_gpu) {
      item.kind = ItemKind::kGpu;
    } else if (has_nic) {
      item.kind = ItemKind::kNic;
    } else if (cls >= 0) {
      if ((cls >> 8) == 0x0604) {
        item.kind = ItemKind::kBridge;
      } else if ((cls >> 16) == 0x03) {
        item.kind = ItemKind::kGpu;  // hint GPU: only used when the file has no <gpu> element at all
      } else if ((cls >> 16) == 0x02) {
        item.kind = ItemKind::kNic;
        NetInfo hint;
        hint.line = item.line;
        hint.from_hint = true;
        item.nets.push_back(hint);
      } else {
        item.kind = has_pci ? ItemKind::kBridge : ItemKind::kOther;
        if (!has_pci)
          notes_.add("PCI devices that are neither GPU, NIC nor bridge ignored",
                     fmt::format("class {} line {}", class_attr.value(), item.line));
      }
    } else if (has_pci) {
      item.kind = ItemKind::kBridge;
      notes_.add("<pci> without class but with <pci> children read as a PCIe switch",
                 fmt::format("line {}", item.line));
    } else {
      item.kind = ItemKind::kOther;
      if (first_classless_line_ == 0) first_classless_line_ = item.line;
      notes_.add("<pci> without class and without <gpu>/<nic> child: device type unknown, ignored",
                 fmt::format("line {}", item.line));
    }
    item.device = device;
    if (item.kind == ItemKind::kBridge) checkBridgeLink(item);
    if (item.kind == ItemKind::kGpu) {
      item.model = gpuModelFromDevice(device, item.gpu.sm);
      checkGpuLink(item);
    }
    return Status::ok();
  }

  void collectGpus(PciItem& item) {
    if (item.kind == ItemKind::kGpu && item.has_gpu_element) {
      (item.gpu.rank >= 0 ? full_gpus_ : rankless_gpus_).push_back(&item);
    }
    for (PciItem& child : item.children) collectGpus(child);
  }

  void collectHintGpus(PciItem& item) {
    if (item.kind == ItemKind::kGpu && !item.has_gpu_element) hint_gpus_.push_back(&item);
    for (PciItem& child : item.children) collectHintGpus(child);
  }

  bool isGpuVertex(const PciItem& item) const {
    if (item.kind != ItemKind::kGpu) return false;
    if (hint_mode_) return !item.has_gpu_element;
    return item.has_gpu_element && (item.gpu.rank >= 0 || rankless_mode_);
  }

  // A NIC PCI device without <nic>/<net> becomes a NIC only in a hint file; in a full dump NCCL's net plugin
  // did not use it.
  bool nicUsable(const PciItem& item) const {
    if (item.kind != ItemKind::kNic) return false;
    for (const NetInfo& net : item.nets) {
      if (hint_mode_ || !net.from_hint) return true;
    }
    return false;
  }

  bool markUseful(PciItem& item) {
    bool useful = isGpuVertex(item) || nicUsable(item);
    for (PciItem& child : item.children) useful = markUseful(child) || useful;
    item.useful = useful;
    return useful;
  }

  std::string uniqueName(const std::string& base) {
    std::string name = base;
    for (int k = 2; used_names_.count(name); ++k) name = fmt::format("{}#{}", base, k);
    used_names_.insert(name);
    return name;
  }

  int netSwitch() {
    if (net_switch_ < 0) net_switch_ = topo_.addVertex(VertexKind::kNetSwitch, -1, uniqueName("net"));
    return net_switch_;
  }

  void addNic(const NetInfo& net, int parent, double up_gbps, int numa, const std::string& busid = "") {
    const std::string base = net.from_hint ? fmt::format("nic{}", hint_nic_count_++) : net.name;
    const int v = topo_.addVertex(VertexKind::kNic, node_, uniqueName(base));
    topo_.vertices[v].numa = numa;
    topo_.vertices[v].busid = busid;
    topo_.addDuplexLink(v, parent, LinkKind::kPcie, up_gbps, kPcieHopAlphaUs);
    if (net.from_hint) {
      notes_.add("NIC speed unknown in this hint file (NCCL takes it from the net plugin): no network link added",
                 label(v));
      return;
    }
    topo_.addDuplexLink(v, netSwitch(), LinkKind::kNet, net.gbps, kNetHopAlphaUs + net.latency_us / 2);
  }

  void buildItem(const PciItem& item, int parent, int numa) {
    switch (item.kind) {
      case ItemKind::kBridge: {
        if (!item.useful) {
          notes_.add("PCIe switches without a GPU or NIC below them left out", fmt::format("line {}", item.line));
          return;
        }
        const int v = topo_.addVertex(VertexKind::kPcieSwitch, node_,
                                      uniqueName(item.raw_busid.empty() ? fmt::format("pcie_line{}", item.line)
                                                                        : "pcie_" + lower(trim(item.raw_busid))));
        topo_.vertices[v].busid = item.raw_busid;
        topo_.vertices[v].numa = numa;
        topo_.addDuplexLink(v, parent, LinkKind::kPcie, item.up_gbps, kPcieHopAlphaUs);
        for (const PciItem& child : item.children) buildItem(child, v, numa);
        return;
      }
      case ItemKind::kGpu: {
        if (isGpuVertex(item)) {
          const int v = gpu_vertex_.at(&item);
          topo_.vertices[v].numa = numa;
          topo_.addDuplexLink(v, parent, LinkKind::kPcie, item.up_gbps, kPcieHopAlphaUs);
        } else if (!hint_mode_ && !item.has_gpu_element) {
          notes_.add("PCI GPUs without a <gpu> element ignored (not used by this NCCL process)",
                     fmt::format("line {}", item.line));
        }
        break;
      }
      case ItemKind::kNic: {
        if (!nicUsable(item)) {
          notes_.add("NIC PCI devices without <nic>/<net> ignored (not used by NCCL's net plugin)",
                     fmt::format("line {}", item.line));
          break;
        }
        if (item.nets.size() > 1) {
          notes_.add("multi-port NICs: every port is one NIC and the ports share the device's PCIe link",
                     fmt::format("{} ports at line {}", item.nets.size(), item.line));
        }
        for (const NetInfo& net : item.nets) {
          if (net.from_hint) {
            pending_hint_nics_.push_back({&net, item.raw_busid, parent, item.up_gbps, numa});
          } else {
            addNic(net, parent, item.up_gbps, numa, item.raw_busid);
          }
        }
        break;
      }
      case ItemKind::kOther: break;
    }
    for (const PciItem& child : item.children) buildItem(child, parent, numa);
  }

  // Which built-in NVLink model fits the hint file's GPUs, from their PCI device ids.
  static std::string hintNvlinkNote(const std::vector<PciItem*>& gpus) {
    std::set<long long> devices;
    for (const PciItem* item : gpus) devices.insert(item->device);
    const std::string head = "no NVLink info in this hint file; NVLink comes from detection or a built-in model";
    const std::string tail = "; this topology has PCIe links only";
    if (devices.size() != 1) {
      return head + " matching the GPUs (they have different PCI device ids, so no single model fits)" + tail;
    }
    const long long device = *devices.begin();
    if (device < 0) {
      return head + " matching the GPU (the file gives no PCI device id, so no specific model is suggested)" + tail;
    }
    const std::string model = gpuModelFromDevice(device, 0);
    const std::string file = nvlinkModelForDevice(device);
    const std::string what = model.empty() ? fmt::format("PCI device {:#06x}", device)
                                           : fmt::format("{} (PCI device {:#06x})", model, device);
    if (file.empty()) return head + fmt::format(" matching the GPU; none is built in for {}", what) + tail;
    return head + fmt::format(" matching the GPU: {}, so {}", what, file) + tail;
  }

  // A full dump whose GPUs are all of an NVLink generation (sm80, sm90, sm100 and later: the generations with SXM
  // boards on NVLink) and not known PCIe cards, with no <nvlink> element on any GPU: NVLink is probably present but
  // absent from the file, since NCCL writes <nvlink> only for the links NVML shows it. Empty when no note is due
  // (one GPU, a GPU with an <nvlink> element, an unknown sm, sm86/sm89 cards, a PCIe card's device id).
  static std::string fullDumpNvlinkNote(const std::vector<PciItem*>& gpus) {
    if (gpus.size() < 2) return "";
    std::set<int> sms;
    std::set<long long> devices;
    for (const PciItem* item : gpus) {
      const int sm = item->gpu.sm;
      if (item->gpu.nvlink_elements > 0 || sm <= 0 || (sm != 80 && sm < 90) || isPcieCardDevice(item->device))
        return "";
      sms.insert(sm);
      devices.insert(item->device);
    }
    std::string sm_list;
    for (int sm : sms) sm_list += fmt::format("{}sm{}", sm_list.empty() ? "" : "/", sm);
    std::string model;
    if (devices.size() == 1 && *devices.begin() >= 0) {
      const std::string file = nvlinkModelForDevice(*devices.begin());
      if (!file.empty()) model = fmt::format("{} ({})", file, gpuModelFromDevice(*devices.begin(), 0));
    }
    if (model.empty() && sms.size() == 1) model = nvlinkModelForSm(*sms.begin());
    return fmt::format(
        "no <nvlink> element in this full dump although its GPUs are {} (a generation whose SXM boards have "
        "NVLink): NVLink is probably present but not in the dump (NCCL writes <nvlink> only for the links NVML "
        "shows it; a container or VM without them, or a static file for NCCL_TOPO_FILE, which NCCL completes "
        "from detection at run time, has none); assumed: no NVLink, this topology has PCIe links only. To fix: "
        "dump the topology again with NCCL_TOPO_DUMP_FILE=<file> from a run where NVLink is visible (`nvidia-smi "
        "nvlink --status` lists the links){}; PCIe cards without NVLink need no fix",
        sm_list, model.empty() ? "" : fmt::format(", or use the built-in model {}", model));
  }

  // Ranks `gpus` by PCI bus id (sortByBusId) and notes the order where it differs from the file's and the GPUs
  // ranked last for want of a readable bus id, each named by where(gpu).
  template <typename Where>
  void rankByBusId(std::vector<PciItem*>& gpus, Where where) {
    const std::vector<PciItem*> document_order = gpus;
    const int unreadable = sortByBusId(gpus);
    if (gpus != document_order) {
      std::string order;
      for (size_t r = 0; r < gpus.size(); ++r)
        order += fmt::format("{}gpu{}={}", r ? ", " : "", r, gpus[r]->raw_busid.empty() ? "?" : gpus[r]->raw_busid);
      notes_.add("GPU ranks differ from the file's document order", order);
    }
    for (size_t r = gpus.size() - static_cast<size_t>(unreadable); r < gpus.size(); ++r)
      notes_.add("GPUs with a missing or unreadable bus id ranked last, in document order", where(gpus[r]));
  }

  Result<Topology> build() {
    topo_.name = std::filesystem::path(filename_).stem().string();
    if (topo_.name.empty()) topo_.name = "nccl-topology";
    topo_.source = filename_;
    node_ = topo_.addNode("node0");

    // GPUs first, in rank order (full dump) or PCI bus-id order (hint file), so vertex ranks are dense.
    std::vector<PciItem*> gpus = hint_mode_ ? hint_gpus_ : full_gpus_;
    for (const PciItem* item : rankless_gpus_) {
      notes_.add(
          "<gpu> elements without rank ignored: other <gpu> elements have ranks, so these are GPUs NCCL's "
          "process did not use",
          fmt::format("{} line {}", item->raw_busid.empty() ? "?" : item->raw_busid, item->gpu.line));
    }
    if (rankless_mode_) {
      notes_.add(fmt::format(
          "no <gpu> element has a rank: the {} GPUs (their sm and NVLinks read as given) ranked by PCI bus id "
          "(domain:bus:device.function, numerically), as CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi and "
          "launchers number them",
          gpus.size()));
      rankByBusId(gpus, [](const PciItem* item) { return fmt::format("line {}", item->gpu.line); });
    } else if (!hint_mode_) {
      std::stable_sort(gpus.begin(), gpus.end(),
                       [](const PciItem* a, const PciItem* b) { return a->gpu.rank < b->gpu.rank; });
      for (size_t i = 1; i < gpus.size(); ++i) {
        if (gpus[i]->gpu.rank == gpus[i - 1]->gpu.rank) {
          return parseError(
              filename_, gpus[i]->gpu.line, "rank",
              fmt::format("rank {} is used twice (also at line {})", gpus[i]->gpu.rank, gpus[i - 1]->gpu.line));
        }
      }
      if (gpus.front()->gpu.rank != 0 || gpus.back()->gpu.rank != static_cast<long long>(gpus.size()) - 1) {
        notes_.add(fmt::format("GPU ranks {}..{} are not dense from 0: renumbered 0..{} in rank order",
                               gpus.front()->gpu.rank, gpus.back()->gpu.rank, gpus.size() - 1));
      }
    } else {
      notes_.add(fmt::format(
          "hint file (NCCL_TOPO_FILE): no <gpu> elements; {} GPUs taken from <pci> class 0x03.... and ranked by "
          "PCI bus id (domain:bus:device.function, numerically), as CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID, "
          "nvidia-smi and launchers number them",
          gpus.size()));
      rankByBusId(gpus, [](const PciItem* item) {
        return item->raw_busid.empty() ? fmt::format("line {}", item->line) : item->raw_busid;
      });
      notes_.add(hintNvlinkNote(gpus));
    }
    if (!hint_mode_) {
      const std::string missing_nvlink = fullDumpNvlinkNote(gpus);
      if (!missing_nvlink.empty()) notes_.add(missing_nvlink);
    }
    std::set<std::string> seen_busids;
    for (PciItem* item : gpus) {
      const int v = topo_.addVertex(VertexKind::kGpu, node_);
      topo_.vertices[v].busid = item->raw_busid;
      topo_.vertices[v].model = item->model;
      used_names_.insert(topo_.vertices[v].name);
      gpu_vertex_[item] = v;
      if (!item->busid.empty() && !seen_busids.insert(item->busid).second) {
        notes_.add("two GPUs share one bus id: NVLink targets resolve to the first", item->raw_busid);
      } else if (!item->busid.empty()) {
        gpu_by_busid_.emplace(item->busid, v);
      }
      gpu_sm_[v] = item->gpu.sm;
      if (!hint_mode_ && !item->gpu.gdr)
        notes_.add("GPUDirect RDMA disabled (gdr=0): NIC traffic stages through host memory", label(v));
    }

    // CPUs (NUMA nodes) joined pairwise by SYS links.
    std::vector<int> cpu_vertex;
    std::set<long long> numas;
    for (size_t i = 0; i < cpus_.size(); ++i) {
      CpuItem& cpu = cpus_[i];
      if (cpu.numa < 0) {
        // Numbered by position, skipping the ids other <cpu> elements give.
        long long free_id = static_cast<long long>(i);
        auto given = [&](long long id) {
          for (const CpuItem& other : cpus_) {
            if (other.numa == id) return true;
          }
          return numas.count(id) > 0;
        };
        while (given(free_id)) ++free_id;
        cpu.numa = free_id;
      }
      if (!numas.insert(cpu.numa).second)
        notes_.add("two <cpu> elements share a numaid", fmt::format("numaid {} line {}", cpu.numa, cpu.line));
      const int v = topo_.addVertex(VertexKind::kCpu, node_, uniqueName(fmt::format("cpu{}", cpu.numa)));
      topo_.vertices[v].numa = static_cast<int>(cpu.numa);
      cpu_vertex.push_back(v);
    }
    for (size_t a = 0; a < cpus_.size(); ++a) {
      for (size_t b = a + 1; b < cpus_.size(); ++b) {
        topo_.addDuplexLink(cpu_vertex[a], cpu_vertex[b], LinkKind::kSys,
                            std::min(cpus_[a].sys_gbps, cpus_[b].sys_gbps), kSysAlphaUs);
      }
    }
    for (size_t i = 0; i < cpus_.size(); ++i) {
      const int numa = topo_.vertices[cpu_vertex[i]].numa;
      for (const PciItem& item : cpus_[i].children) buildItem(item, cpu_vertex[i], numa);
      for (const NetInfo& net : cpus_[i].bare_nets) {
        if (looksVirtualNetName(net.name)) {
          notes_.add("virtual network interfaces with no PCI parent (docker bridge/veth) dropped", net.name);
          continue;
        }
        notes_.add("NICs with no PCI parent attached to their CPU at their network speed", net.name);
        addNic(net, cpu_vertex[i], net.gbps, numa);
      }
    }
    // Hint-file NICs (class 0x02....) are numbered nic0, nic1, ... by PCI bus id, as the GPUs are, so that GPU i
    // and NIC i of a rail-paired machine (NDv4: 0001 with 0101, ...) line up.
    std::vector<PendingNic*> hint_nics;
    for (PendingNic& p : pending_hint_nics_) hint_nics.push_back(&p);
    sortByBusId(hint_nics);
    if (hint_nics.size() > 1) notes_.add("hint-file NICs numbered nic0.. by PCI bus id, as the GPUs are ranked");
    for (const PendingNic* p : hint_nics) addNic(*p->net, p->parent, p->up_gbps, p->numa, p->raw_busid);
    if (cpus_.size() == 1 && gpus.size() > 4) {
      notes_.add(
          fmt::format("all {} GPUs sit under one <cpu> (NUMA node); on a 2-socket machine the inter-socket "
                      "(SYS) link is missing from this file",
                      gpus.size()));
    }

    BRAID_RETURN_IF_ERROR(buildNvlinks(gpus, cpu_vertex));

    std::vector<std::string> out;
    notes_.emit(out);
    topo_.notes.insert(topo_.notes.end(), out.begin(), out.end());
    // Errors name the file (the topology's source) and what in it is at fault: a link outside physical ranges, GPUs
    // that no chain of links joins.
    BRAID_RETURN_IF_ERROR(validateTopology(topo_));
    return std::move(topo_);
  }

  // A vertex as the user finds it in the file: its name (gpu<rank>, the NIC's net name) and its PCI bus id.
  std::string label(int v) const {
    const Vertex& x = topo_.vertices[v];
    return x.busid.empty() ? x.name : fmt::format("{} = {}", x.name, x.busid);
  }

  int cpuOfGpu(int gpu_vertex, const std::vector<int>& cpu_vertex) const {
    const int numa = topo_.vertices[gpu_vertex].numa;
    for (int c : cpu_vertex) {
      if (topo_.vertices[c].numa == numa) return c;
    }
    return cpu_vertex.front();
  }

  Status buildNvlinks(const std::vector<PciItem*>& gpus, const std::vector<int>& cpu_vertex) {
    std::map<std::pair<int, int>, int> direct;  // (src, dst) vertex -> lanes
    std::map<int, int> switch_lanes;            // gpu vertex -> lanes to NVSwitches
    for (PciItem* item : gpus) {
      const int v = gpu_vertex_.at(item);
      const std::string gname = label(v);
      for (const NvlinkInfo& link : item->gpu.nvlinks) {
        if (!item->busid.empty() && link.target == item->busid) {
          notes_.add("NVLink self-loops (target = the GPU's own bus id) ignored, never counted as bandwidth",
                     fmt::format("{} count {} line {}", gname, link.count, link.line));
          continue;
        }
        const bool invisible = link.target.rfind("fffffff", 0) == 0 || link.target.rfind("0fffffff", 0) == 0;
        auto peer = gpu_by_busid_.find(link.target);
        long long cls = link.tclass;
        if (cls < 0) {
          cls = peer != gpu_by_busid_.end() ? 0x030200 : 0x068000;
          notes_.add("<nvlink> without tclass: target kind inferred from its bus id",
                     fmt::format("line {}", link.line));
        }
        if (cls == 0x068001) {
          const int cpu = cpuOfGpu(v, cpu_vertex);
          topo_.addDuplexLink(v, cpu, LinkKind::kNvlink, link.count * nvlinkLaneGbps(gpu_sm_[v]), kNvlinkDirectAlphaUs,
                              link.count);
          notes_.add("NVLinks to the CPU (tclass 0x068001) joined to the GPU's CPU vertex", gname);
        } else if ((cls >> 16) == 0x03) {
          if (peer == gpu_by_busid_.end()) {
            notes_.add("NVLink targets that match no GPU element ignored",
                       fmt::format("{} -> {} line {}", gname, link.raw_target, link.line));
            continue;
          }
          if (peer->second == v) continue;
          direct[{v, peer->second}] += link.count;
        } else {
          if ((cls >> 8) != 0x0680 && (cls >> 8) != 0x0604) {
            notes_.add("NVLink targets of an unexpected tclass read as NVSwitch ports",
                       fmt::format("line {}", link.line));
          }
          if (invisible) {
            notes_.add("NVLink target not visible (VM-style bus id, BUG-08): treated as an NVSwitch port",
                       fmt::format("{} -> {} count {}", gname, link.raw_target, link.count));
          }
          switch_lanes[v] += link.count;
        }
      }
      for (const C2cInfo& c2c : item->gpu.c2c) {
        topo_.addDuplexLink(v, cpuOfGpu(v, cpu_vertex), LinkKind::kC2c, c2c.gbps, kNvlinkDirectAlphaUs, c2c.count);
      }
    }
    for (const auto& [pair, lanes] : direct) {
      const auto [a, b] = pair;
      topo_.addLink(a, b, LinkKind::kNvlink, lanes * nvlinkLaneGbps(gpu_sm_[a]), kNvlinkDirectAlphaUs, lanes);
      auto back = direct.find({b, a});
      if (back == direct.end()) {
        notes_.add("NVLinks listed by one GPU only: the reverse direction added with the same lane count",
                   fmt::format("{} - {}", label(a), label(b)));
        topo_.addLink(b, a, LinkKind::kNvlink, lanes * nvlinkLaneGbps(gpu_sm_[b]), kNvlinkDirectAlphaUs, lanes);
      } else if (back->second != lanes && a < b) {
        notes_.add("NVLink lane counts differ between the two ends; each direction keeps its own count",
                   fmt::format("{} -> {} {} vs {}", label(a), label(b), lanes, back->second));
      }
    }
    if (!switch_lanes.empty()) {
      const int nvswitch = topo_.addVertex(VertexKind::kNvSwitch, node_, uniqueName("nvswitch"));
      std::map<int, int> histogram;
      for (const auto& [v, lanes] : switch_lanes) ++histogram[lanes];
      int common = 0, common_count = 0;
      for (const auto& [lanes, count] : histogram) {
        if (count > common_count) common = lanes, common_count = count;
      }
      for (const auto& [v, lanes] : switch_lanes) {
        topo_.addDuplexLink(v, nvswitch, LinkKind::kNvlink, lanes * nvlinkLaneGbps(gpu_sm_[v]), kNvswitchHopAlphaUs,
                            lanes);
        if (lanes != common) {
          notes_.add(fmt::format("GPUs whose NVSwitch lane count differs from the others' {}", common),
                     fmt::format("{} has {}", label(v), lanes));
        }
      }
      if (switch_lanes.size() < static_cast<size_t>(topo_.numGpus())) {
        for (int r = 0; r < topo_.numGpus(); ++r) {
          const int v = topo_.gpuVertex(r);
          if (!switch_lanes.count(v)) notes_.add("GPUs with no NVLink to the NVSwitch fabric", label(v));
        }
      }
      notes_.add(
          fmt::format("NVSwitch ports folded into one NVSwitch vertex; each GPU's lanes are the sum of its counts "
                      "to NVSwitches ({} lanes on most GPUs)",
                      common));
    }
    return Status::ok();
  }

  const std::string& text_;
  const std::string& filename_;
  LineIndex lines_;
  NoteList notes_;
  std::vector<CpuItem> cpus_;
  std::vector<PciItem*> full_gpus_;
  std::vector<PciItem*> hint_gpus_;
  bool hint_mode_ = false;
  bool rankless_mode_ = false;  // no <gpu> has a rank: every <gpu> is used, ranked by bus id
  std::vector<PciItem*> rankless_gpus_;
  int first_classless_line_ = 0;
  Topology topo_;
  int node_ = -1;
  int net_switch_ = -1;
  int hint_nic_count_ = 0;
  std::vector<PendingNic> pending_hint_nics_;
  std::set<std::string> used_names_;
  std::map<const PciItem*, int> gpu_vertex_;
  std::map<std::string, int> gpu_by_busid_;
  std::map<int, int> gpu_sm_;
};

}  // namespace

Result<Topology> importNcclTopoXml(const std::string& text, const std::string& filename) {
  try {
    XmlImporter importer(text, filename);
    return importer.run();
  } catch (const std::exception& e) {
    return parseError(filename, 0, "", fmt::format("cannot read NCCL topology XML: {}", e.what()));
  }
}

}  // namespace braid
