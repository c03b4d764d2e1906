#include "braid_perf/report.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "braid/file_io.h"

namespace braid::perf {

std::string formatTime(double time_us) {
  if (time_us >= 10000.0) return fmt::format("{:7.0f}", time_us);
  if (time_us >= 100.0) return fmt::format("{:7.1f}", time_us);
  return fmt::format("{:7.2f}", time_us);
}

std::string formatBandwidth(double gbps) { return fmt::format("{:6.2f}", gbps); }

std::string formatPreamble(const Options& options, const std::string& version, const std::string& braid_line,
                           const std::vector<DeviceLine>& devices) {
  std::string out;
  out += fmt::format("# Braid braid_perf version {} (nccl-tests format)\n", version);
  out += fmt::format("# Collective test starting: {}\n", testName(options.collective));
  const bool factor = options.step_factor > 1;
  out += fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: {} "
      "validation: {} graph: 0\n",
      options.threads, options.gpus, options.min_bytes, options.max_bytes,
      factor ? options.step_factor : options.step_bytes, factor ? "factor" : "bytes", options.warmup_iters,
      options.iters, options.agg_iters, options.check);
  if (!braid_line.empty()) out += "# " + braid_line + "\n";
  if (options.blocking) out += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  out += "#\n# Using devices\n";
  for (const DeviceLine& d : devices) {
    out += fmt::format("#  Rank {:2d} Group {:2d} Pid {:6d} on {:>10} device {:2d} [cpu] {}\n", d.rank, 0, d.pid,
                       d.host, 0, d.info);
  }
  return out;
}

std::string formatColumnHeader() {
  std::string out = "#\n";
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place  "
      "        \n",
      "", "", "", "", "");
  out += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}\n",
                     "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                     "busbw", "#wrong");
  out += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}\n",
                     "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return out;
}

namespace {

std::string formatMode(const ModeResult& m) {
  std::string out = "  " + formatTime(m.time_us) + "  " + formatBandwidth(m.algbw) + "  " + formatBandwidth(m.busbw);
  out += m.checked ? fmt::format("  {:5d}", m.wrong) : std::string("    N/A");
  return out;
}

nlohmann::json modeJson(const ModeResult& m) {
  return {{"time", m.time_us},
          {"alg_bw", m.algbw},
          {"bus_bw", m.busbw},
          {"nwrong", m.checked ? nlohmann::json(m.wrong) : nlohmann::json(nullptr)}};
}

}  // namespace

std::string formatRow(const RowResult& row) {
  return fmt::format("{:12d}  {:12d}  {:>8}  {:>6}  {:6d}", row.bytes, row.count, row.type, row.op, row.root) +
         formatMode(row.out_of_place) + formatMode(row.in_place) + "\n";
}

std::string formatFooter(int out_of_bounds, double avg_busbw, const std::string& test_name) {
  std::string out;
  out += fmt::format("# {:<20} : {} {}\n", "Out of bounds values", out_of_bounds, out_of_bounds ? "FAILED" : "OK");
  // %g, as nccl-tests; its empty pass/fail word leaves a trailing space.
  char bw[64];
  std::snprintf(bw, sizeof(bw), "%g", avg_busbw);
  out += fmt::format("# {:<20} : {} \n", "Avg bus bandwidth", bw);
  out += "#\n";
  out += fmt::format("# Collective test concluded: {}\n", test_name);
  return out;
}

std::string nowString() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &local);
  return buffer;
}

JsonReport::JsonReport(const Options& options, const std::vector<std::string>& argv, const std::string& version,
                       const std::vector<DeviceLine>& devices, const std::string& transport) {
  doc_["version"] = 2;  // nccl-tests' JSON_FILE_VERSION this layout follows
  doc_["generator"] = "braid_perf " + version;
  doc_["start_time"] = nowString();
  doc_["args"] = argv;
  doc_["collective"] = collectiveName(options.collective);
  nlohmann::json config = {
      {"nthreads", options.threads},
      {"ngpus", options.gpus},
      {"nprocs", options.processes},
      {"nranks", options.ranks()},
      {"minimum_bytes", options.min_bytes},
      {"maximum_bytes", options.max_bytes},
      {"warmup_iters", options.warmup_iters},
      {"iterations", options.iters},
      {"aggregated_iterations", options.agg_iters},
      {"run_cycles", options.run_cycles},
      {"validation", options.check},
      {"graph", 0},
      {"blocking_collectives", options.blocking != 0},
      {"average", options.average},
      {"transport", transport},
      {"algo", options.algo},
  };
  if (options.step_factor > 1) {
    config["step_factor"] = options.step_factor;
  } else {
    config["step_bytes"] = options.step_bytes;
  }
  nlohmann::json devs = nlohmann::json::array();
  for (const DeviceLine& d : devices) {
    devs.push_back({{"rank", d.rank},
                    {"group", 0},
                    {"pid", d.pid},
                    {"hostname", d.host},
                    {"device", 0},
                    {"device_hex", "cpu"},
                    {"device_info", d.info}});
  }
  config["devices"] = devs;
  doc_["config"] = config;
  doc_["results"] = nlohmann::json::array();
}

void JsonReport::addRow(const RowResult& row) {
  doc_["results"].push_back({{"size", row.bytes},
                             {"count", row.count},
                             {"type", row.type},
                             {"redop", row.op},
                             {"root", row.root},
                             {"out_of_place", modeJson(row.out_of_place)},
                             {"in_place", modeJson(row.in_place)}});
}

void JsonReport::finish(int out_of_bounds, double avg_busbw, const std::vector<std::string>& errors) {
  doc_["out_of_bounds"] = {{"count", out_of_bounds}, {"okay", out_of_bounds == 0}};
  doc_["average_bus_bandwidth"] = {{"bandwidth", avg_busbw}, {"okay", "unchecked"}};
  doc_["errors"] = errors;
  doc_["end_time"] = nowString();
}

Status checkJsonPath(const std::string& path) {
  // As the braid CLI checks its outputs (checkOutputPath), with the same words; the report is written in place
  // (std::ofstream), so an existing file must itself be writable.
  if (path.empty()) return Status(StatusCode::kInvalidUsage, "-J: an empty path names no file to write");
  BRAID_RETURN_IF_ERROR(checkOutputPath(path));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), W_OK) != 0) {
    return invalidArgument(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  return Status::ok();
}

Status JsonReport::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return Status(StatusCode::kSystemError, "-J " + path + ": cannot open for writing");
  out << doc_.dump(2) << "\n";
  out.close();
  if (!out) return Status(StatusCode::kSystemError, "-J " + path + ": write failed");
  return Status::ok();
}

}  // namespace braid::perf
