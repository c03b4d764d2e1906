// Creating a ucp context one at a time, UCM's memory events off (ucx/ucx_init.h).
#ifdef BRAID_HAVE_UCX
#include "ucx/ucx_init.h"

#include <ucm/api/ucm.h>

#include <cstdlib>
#include <mutex>

namespace braid::ucx {

ucs_status_t initContext(const ucp_params_t& params, ucp_context_h* context, const char** failed_call) {
  static std::mutex init_mutex;
  std::lock_guard<std::mutex> lock(init_mutex);
  *context = nullptr;
  if (std::getenv("UCX_MEM_EVENTS") == nullptr && ucm_global_opts.enable_events) {
    ucm_global_config_t options = ucm_global_opts;
    options.enable_events = 0;
    ucm_set_global_opts(&options);
  }
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    *failed_call = "ucp_config_read";
    return status;
  }
  status = ucp_init(&params, config, context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    *context = nullptr;
    *failed_call = "ucp_init";
  }
  return status;
}

}  // namespace braid::ucx
#endif  // BRAID_HAVE_UCX
