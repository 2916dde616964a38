#pragma once
// defines: tagc::detail::portable_packed<Wire, Exec> — PackedPolicy's slots as
//          bulk launches of the single-source functors (detail/packed_kernels.hpp):
//          marks per index byte scanned into offsets (CUB on CUDA: thrust's scan
//          would cudaMalloc / cudaFree its temporaries every call), each shard's
//          start, one call per index byte packing its entries (g + residual
//          recomputed) or unpacking the owner's. What a GPU runs, and
//          exec::host_portable on a CPU.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#if defined(__CUDACC__)
#  include <cub/device/device_scan.cuh>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

#include "../core/status.hpp"
#include "../shard/layout.hpp"
#include "compress_handoff.hpp"
#include "host/support_list.hpp"
#include "index_kernels.hpp"
#include "launch.hpp"
#include "packed_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Wire, class Exec>
class portable_packed {
 public:
  status initialize(const layout& l, int shards, Exec exec) {
    launch_ = {exec};
    lay_ = l;
    shards_ = std::size_t(shards);
    const std::size_t index_all = l.index_bytes * shards_;
    offsets_.assign(index_all + 1, 0u);
    starts_.assign(shards_ + 1, 0u);
    starts_host_.assign(starts_.size(), 0u);
#if defined(__CUDACC__)
    if constexpr (Exec::is_device) {
      std::size_t bytes = 0;
      TAGC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, marks_of(nullptr), raw(offsets_),
                                                  int(index_all + 1), exec.stream));
      scan_temp_.assign(bytes ? bytes : 1, 0);
    }
#endif
    // the support in support()
    TAGC_TRY(sums_.template reserve<unsigned long long>(exec, l.index_bytes, count_marks{nullptr, l, 0}));
    return {};
  }
  std::size_t workspace_bytes() const {
    return buffer_bytes(offsets_) + buffer_bytes(starts_) + starts_host_.size() * sizeof(std::uint32_t) +
           buffer_bytes(scan_temp_) + sums_.workspace_bytes();
  }
  // What initialize allocates, before it does (the reducers' workspace query; on a
  // device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const layout& l, int shards) {
    return (l.index_bytes * std::size_t(shards) + 1 + 2 * (std::size_t(shards) + 1)) * sizeof(std::uint32_t);
  }

  // Slots per shard = marks in it (every rank computes all of them alike); this
  // rank's values at the union positions of the whole reduced index `idx` into
  // `send`, [shards][slots] or back to back (packed_layout). `own`: the owner's shard.
  template <class Residual>
  packed_layout pack(const std::uint8_t* idx, const contribution<Residual>& value, const kept_entries&,
                     float wire_scale, std::size_t own, Wire* send) {
    const std::size_t index_all = offsets_.size() - 1;
    // The slots' offsets: marks per index byte, scanned. On CUDA by CUB into
    // scan_temp_; an error shows at the space's synchronize().
    if constexpr (Exec::is_device) {
#if defined(__CUDACC__)
      std::size_t bytes = scan_temp_.size();
      (void)cub::DeviceScan::ExclusiveSum(raw(scan_temp_), bytes, marks_of(idx), raw(offsets_), int(index_all + 1),
                                          launch_.exec.stream);
#endif
    } else {
      const auto marks = marks_of(idx);
      thrust::exclusive_scan(launch_.exec.policy(), marks, marks + std::ptrdiff_t(index_all + 1), offsets_.begin(), 0u);
    }
    launch_(starts_.size(), shard_starts{raw(offsets_), raw(starts_), lay_.index_bytes});
    (void)launch_.exec.copy_to_host(raw(starts_), starts_host_.data(), starts_host_.size());
    packed_layout p;
    for (std::size_t s = 0; s + 1 < starts_host_.size(); ++s)
      p.largest = std::max<std::size_t>(p.largest, starts_host_[s + 1] - starts_host_[s]);
    p.whole_union = starts_host_[shards_];
    p.before_own = starts_host_[own];
    p.back_to_back = unions_back_to_back(shards_, p.largest, p.whole_union);
    const std::size_t slots = p.back_to_back ? 0 : p.largest;  // 0: back to back, no padding
    if (!p.back_to_back) launch_(shards_ * slots, zero_padding_slots<Wire>{raw(starts_), send, slots});
    launch_(index_all, pack_values<Wire, contribution<Residual>>{value, idx, raw(offsets_), raw(starts_), send, slots,
                                                                 wire_scale});
    return p;
  }

  // The owner's shard `own` from its summed slots: float(slot) * scale at its union entries, 0 elsewhere.
  void unpack(const std::uint8_t* idx, std::size_t own, const Wire* recv, float scale, float* out) {
    launch_(lay_.index_bytes, unpack_values<Wire>{idx, raw(offsets_), raw(starts_), recv, out, scale, lay_, own});
  }

  // Marks in the owner's reduced index (its shard's union).
  unsigned long long support(const std::uint8_t* own_index, std::size_t own) const {
    if constexpr (!Exec::is_device)  // 64 marks per popcount, not a loop per entry
      return host::count_marks(own_index, lay_, own, 1);
    else
      return sums_.template sum<unsigned long long>(launch_, lay_.index_bytes, count_marks{own_index, lay_, own});
  }

 private:
  // Marks in each byte of the whole index `idx` (0 past its end): the scan's input.
  auto marks_of(const std::uint8_t* idx) const {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                           marks_in_byte{idx, lay_, lay_.index_bytes * shards_});
  }

  launcher<Exec> launch_{};
  layout lay_{};
  std::size_t shards_ = 1;
  template <class T> using vector = typename Exec::template vector<T>;
  vector<std::uint32_t> offsets_, starts_;  // scan over index bytes, shard starts
  vector<unsigned char> scan_temp_;         // CUB's scan workspace (CUDA only)
  sum_workspace<Exec> sums_;                // the support on a device
  std::vector<std::uint32_t> starts_host_;  // host copy of starts_ (sized once)
};

}  // namespace detail
TAGC_END_NAMESPACE
