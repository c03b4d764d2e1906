// Names and classification of IR enums (MSCCL spellings, ../shared/reference/taccl_msccl.md §2.3).
#include "braid/algorithm.h"

namespace braid {

const char* bufferName(BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return "i";
    case BufferKind::kOutput: return "o";
    case BufferKind::kScratch: return "s";
  }
  return "?";
}

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::kSimple: return "Simple";
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
  }
  return "?";
}

const char* opTypeName(OpType t) {
  switch (t) {
    case OpType::kSend: return "s";
    case OpType::kRecv: return "r";
    case OpType::kRecvCopySend: return "rcs";
    case OpType::kRecvReduceSend: return "rrs";
    case OpType::kRecvReduceCopy: return "rrc";
    case OpType::kRecvReduceCopySend: return "rrcs";
    case OpType::kCopy: return "cpy";
    case OpType::kReduce: return "re";
    case OpType::kNop: return "nop";
  }
  return "?";
}

std::optional<OpType> parseOpType(std::string_view name) {
  for (OpType t :
       {OpType::kSend, OpType::kRecv, OpType::kRecvCopySend, OpType::kRecvReduceSend, OpType::kRecvReduceCopy,
        OpType::kRecvReduceCopySend, OpType::kCopy, OpType::kReduce, OpType::kNop}) {
    if (name == opTypeName(t)) return t;
  }
  return std::nullopt;
}

bool opSends(OpType t) {
  return t == OpType::kSend || t == OpType::kRecvCopySend || t == OpType::kRecvReduceSend ||
         t == OpType::kRecvReduceCopySend;
}

bool opReceives(OpType t) {
  return t == OpType::kRecv || t == OpType::kRecvCopySend || t == OpType::kRecvReduceSend ||
         t == OpType::kRecvReduceCopy || t == OpType::kRecvReduceCopySend;
}

bool opReadsSrc(OpType t) {
  return t == OpType::kSend || t == OpType::kRecvReduceSend || t == OpType::kRecvReduceCopy ||
         t == OpType::kRecvReduceCopySend || t == OpType::kCopy || t == OpType::kReduce;
}

bool opWritesDst(OpType t) {
  return t == OpType::kRecv || t == OpType::kRecvCopySend || t == OpType::kRecvReduceCopy ||
         t == OpType::kRecvReduceCopySend || t == OpType::kCopy || t == OpType::kReduce;
}

const char* issueKindName(IssueKind kind) {
  switch (kind) {
    case IssueKind::kStructure: return "structure";
    case IssueKind::kOutOfRange: return "out-of-range";
    case IssueKind::kPeerMismatch: return "peer-mismatch";
    case IssueKind::kDeadlock: return "deadlock";
    case IssueKind::kRace: return "race";
    case IssueKind::kPostcondition: return "postcondition";
    case IssueKind::kUnverifiable: return "unverifiable";
  }
  return "?";
}

}  // namespace braid
