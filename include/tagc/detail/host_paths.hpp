#pragma once
// defines: tagc::detail::uses_host_paths<Exec> — whether a stage runs its host
//          implementation on execution space Exec (exec::host; exec::host_portable
//          and device spaces run the portable functors). The dispatch headers
//          (compress_dispatch.hpp) choose by it.

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Exec>
inline constexpr bool uses_host_paths = [] {
  if constexpr (requires { Exec::host_paths; }) return !Exec::is_device && Exec::host_paths;
  else return false;
}();

}  // namespace detail
TAGC_END_NAMESPACE
