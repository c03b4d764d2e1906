#include "braid/topology.h"

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

namespace braid {

const char* vertexKindName(VertexKind kind) {
  switch (kind) {
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNic: return "nic";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kPcieSwitch: return "pcie_switch";
    case VertexKind::kCpu: return "cpu";
    case VertexKind::kNetSwitch: return "net_switch";
  }
  return "?";
}

const char* linkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kSys: return "sys";
    case LinkKind::kNet: return "net";
    case LinkKind::kC2c: return "c2c";
  }
  return "?";
}

std::optional<VertexKind> parseVertexKind(const std::string& name) {
  for (VertexKind k : {VertexKind::kGpu, VertexKind::kNic, VertexKind::kNvSwitch, VertexKind::kPcieSwitch,
                       VertexKind::kCpu, VertexKind::kNetSwitch}) {
    if (name == vertexKindName(k)) return k;
  }
  return std::nullopt;
}

std::optional<LinkKind> parseLinkKind(const std::string& name) {
  for (LinkKind k : {LinkKind::kNvlink, LinkKind::kPcie, LinkKind::kSys, LinkKind::kNet, LinkKind::kC2c}) {
    if (name == linkKindName(k)) return k;
  }
  return std::nullopt;
}

std::optional<int> gpuComputeCapability(const std::string& model) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : model) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      tokens.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) tokens.push_back(cur);
  auto digits = [](const std::string& t, size_t from) {
    if (from >= t.size() || t.size() - from > 3) return false;
    for (size_t i = from; i < t.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
    }
    return true;
  };
  // "sm90", "SM_90", "sm 90".
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.rfind("SM", 0) != 0) continue;
    if (digits(t, 2)) return std::stoi(t.substr(2));
    if (t == "SM" && i + 1 < tokens.size() && digits(tokens[i + 1], 0)) return std::stoi(tokens[i + 1]);
  }
  // Product codes; a token matches a code exactly or followed by letters only (A10G, L40S, H100NVL), so A100 never
  // reads as A10.
  struct Code {
    const char* code;
    int sm;
  };
  static const Code kCodes[] = {
      {"GB200", 100}, {"B200", 100}, {"B100", 100}, {"GH200", 90}, {"H200", 90},  {"H100", 90},  {"H800", 90},
      {"H20", 90},    {"L40", 89},   {"L20", 89},   {"L4", 89},    {"A6000", 86}, {"A5500", 86}, {"A5000", 86},
      {"A4500", 86},  {"A4000", 86}, {"A2000", 86}, {"A40", 86},   {"A16", 86},   {"A10", 86},   {"A2", 86},
      {"A100", 80},   {"A800", 80},  {"A30", 80},   {"T4", 75},    {"V100", 70},  {"P100", 60}};
  for (const std::string& t : tokens) {
    for (const Code& c : kCodes) {
      const std::string code = c.code;
      if (t.rfind(code, 0) != 0) continue;
      bool letters = true;
      for (size_t i = code.size(); i < t.size(); ++i) {
        if (!std::isalpha(static_cast<unsigned char>(t[i]))) letters = false;
      }
      if (letters) return c.sm;
    }
  }
  // GeForce/RTX by number: RTX 4090 (Ada) 89, RTX 3090 (Ampere) 86, RTX 2080 (Turing) 75; "RTX 6000 Ada" 89.
  bool rtx = false, ada = false;
  for (const std::string& t : tokens) {
    rtx = rtx || t == "RTX" || t == "GEFORCE";
    ada = ada || t == "ADA";
  }
  if (rtx) {
    if (ada) return 89;
    for (const std::string& t : tokens) {
      if (t.size() != 4 || !digits(t.substr(1), 0) || !std::isdigit(static_cast<unsigned char>(t[0]))) continue;
      if (t[0] == '4') return 89;
      if (t[0] == '3') return 86;
      if (t[0] == '2') return 75;
    }
  }
  return std::nullopt;
}

int Topology::addNode(const std::string& node_name, const std::string& tmpl) {
  Node n;
  n.name = node_name.empty() ? fmt::format("node{}", nodes.size()) : node_name;
  n.tmpl = tmpl;
  nodes.push_back(std::move(n));
  return static_cast<int>(nodes.size()) - 1;
}

int Topology::addVertex(VertexKind kind, int node, const std::string& vertex_name) {
  Vertex v;
  v.id = static_cast<int>(vertices.size());
  v.kind = kind;
  v.node = node;
  int same_kind_in_node = 0;
  for (const Vertex& u : vertices) {
    if (u.kind == kind && u.node == node) ++same_kind_in_node;
  }
  v.local = same_kind_in_node;
  if (kind == VertexKind::kGpu) {
    v.rank = numGpus();
    v.name = fmt::format("gpu{}", v.rank);
  } else {
    v.name = vertex_name.empty() ? fmt::format("{}{}", vertexKindName(kind), v.id) : vertex_name;
  }
  if (node >= 0 && node < numNodes()) {
    if (kind == VertexKind::kGpu) nodes[node].gpus.push_back(v.id);
    if (kind == VertexKind::kNic) nodes[node].nics.push_back(v.id);
  }
  vertices.push_back(std::move(v));
  return static_cast<int>(vertices.size()) - 1;
}

int Topology::addLink(int src, int dst, LinkKind kind, double bandwidth_gbps, double alpha_us, int lanes) {
  Link l;
  l.src = src;
  l.dst = dst;
  l.kind = kind;
  l.bandwidth_gbps = bandwidth_gbps;
  l.alpha_us = alpha_us;
  l.lanes = lanes;
  links.push_back(l);
  return static_cast<int>(links.size()) - 1;
}

void Topology::addDuplexLink(int a, int b, LinkKind kind, double bandwidth_gbps, double alpha_us, int lanes) {
  addLink(a, b, kind, bandwidth_gbps, alpha_us, lanes);
  addLink(b, a, kind, bandwidth_gbps, alpha_us, lanes);
}

int Topology::numGpus() const {
  int n = 0;
  for (const Vertex& v : vertices) n += v.kind == VertexKind::kGpu ? 1 : 0;
  return n;
}

int Topology::gpuVertex(int rank) const {
  for (const Vertex& v : vertices) {
    if (v.kind == VertexKind::kGpu && v.rank == rank) return v.id;
  }
  return -1;
}

int Topology::findVertex(const std::string& vertex_name) const {
  for (const Vertex& v : vertices) {
    if (v.name == vertex_name) return v.id;
  }
  return -1;
}

std::vector<int> Topology::outLinks(int vertex) const {
  std::vector<int> out;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].src == vertex) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> Topology::inLinks(int vertex) const {
  std::vector<int> out;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].dst == vertex) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> Topology::linksBetween(int src, int dst) const {
  std::vector<int> out;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].src == src && links[i].dst == dst) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace braid
