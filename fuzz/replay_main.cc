// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer (the ordinary build's ctest
// tests): every regular file named, every file of every directory named (sorted, not recursive), and every file a
// manifest names.
//
//   <target>_replay [--manifest FILE --root DIR] [PATH ...]
//
// A manifest lists one glob pattern per line, relative to --root ('#' starts a comment); patterns that match
// nothing are skipped (../shared may be absent). A crash, an abort or an escaping exception ends the process with
// a failure status after naming the input; otherwise it prints how many inputs it replayed and exits 0.
#include <glob.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

void addPath(const fs::path& path, std::vector<fs::path>* inputs) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file(ec)) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    inputs->insert(inputs->end(), files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    inputs->push_back(path);
  } else {
    std::fprintf(stderr, "replay: %s: no such file or directory (skipped)\n", path.c_str());
  }
}

bool addManifest(const fs::path& manifest, const fs::path& root, std::vector<fs::path>* inputs) {
  std::ifstream in(manifest);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read manifest %s\n", manifest.c_str());
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    line.erase(std::find(line.begin(), line.end(), '#'), line.end());
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    const std::string pattern = (root / line).string();
    glob_t matches{};
    if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) addPath(matches.gl_pathv[i], inputs);
    }
    globfree(&matches);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  fs::path manifest, root = ".";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--manifest") == 0 && i + 1 < argc) {
      manifest = argv[++i];
    } else if (std::strcmp(argv[i], "--root") == 0 && i + 1 < argc) {
      root = argv[++i];
    } else {
      addPath(argv[i], &inputs);
    }
  }
  if (!manifest.empty() && !addManifest(manifest, root, &inputs)) return 2;
  LLVMFuzzerInitialize(&argc, &argv);
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "replay: %s: exception escaped: %s\n", path.c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "replay: %s: non-standard exception escaped\n", path.c_str());
      return 1;
    }
  }
  std::printf("replay: %zu inputs, no crash\n", inputs.size());
  return 0;
}
