// What the C API's files share (c_api.cc, moe_c_api.cc): the braidComm handle behind braidComm_t and the
// translation of a Status into braidResult_t with the message kept for braidGetLastError.
#pragma once

#include <memory>
#include <string>

#include "braid/braid.h"
#include "braid/comm.h"

struct braidComm {
  std::unique_ptr<braid::Communicator> impl;
  std::string last_error;
};

namespace braid::capi {

inline braidResult_t toResult(const Status& status) {
  return static_cast<braidResult_t>(toNcclResultCode(status.code()));
}

/// Keeps the status's message as comm's last error ("" on success) and returns its code.
inline braidResult_t record(braidComm_t comm, const Status& status) {
  if (comm != nullptr) comm->last_error = status.isOk() ? "" : status.toString();
  return toResult(status);
}

inline bool validType(braidDataType_t type) { return type >= 0 && type < braidNumTypes; }

/// A usable communicator and a NULL stream (the CPU runtime's), else the error (recorded on comm).
inline braidResult_t checkCall(braidComm_t comm, void* stream) {
  if (comm == nullptr || !comm->impl) return braidInvalidArgument;
  if (stream != nullptr) {
    comm->last_error = "invalid argument: the CPU runtime takes stream = NULL";
    return braidInvalidArgument;
  }
  return braidSuccess;
}

inline braidResult_t badEnum(braidComm_t comm, const char* what, int value) {
  comm->last_error = std::string("invalid argument: ") + what + " " + std::to_string(value);
  return braidInvalidArgument;
}

}  // namespace braid::capi
