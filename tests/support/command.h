// Runs a shell command for a test and returns its standard output (popen); `*status` gets pclose's status (-1 when
// the command could not be started). Used by the tests that inspect built libraries (nm, readelf) or run programs.
#pragma once

#include <cstdio>
#include <string>

namespace braid::test {

inline std::string runCommand(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, got);
  *status = pclose(pipe);
  return out;
}

}  // namespace braid::test
