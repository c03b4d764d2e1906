// What the tests of include/braid/file_io.h need beyond the public API.
#pragma once

#include <functional>
#include <string>

#include "braid/status.h"

namespace braid::detail {

/// writeFileAtomic, with `mid_write` (when set) called once after the first half of `content` is in the
/// temporary file, with that file's path: lets a test end the process by a signal in the middle of a write.
Status writeFileAtomicHooked(const std::string& path, const std::string& content,
                             const std::function<void(const std::string& temp_path)>& mid_write);

}  // namespace braid::detail
