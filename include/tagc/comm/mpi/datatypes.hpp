#pragma once
// defines: tagc::detail::mpi::datatype_of, tagc::detail::mpi::wrapping_sum_u8,
//          tagc::detail::mpi::half_sum — how tagc's element types travel over MPI
//          and the sums MPI's own MPI_SUM gets wrong for them (part of comm/mpi.hpp).

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../argument_rules.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail::mpi {

// The MPI datatype an element travels as, by tagc's element id (comm/argument_rules.hpp).
// bfloat16 and float16 travel as 16-bit words; only the user-defined op (half_sum)
// reads them as 16-bit floats.
template <reducible T>
MPI_Datatype datatype_of() noexcept {
  // Not constexpr: Open MPI's datatypes are addresses of its globals.
  const MPI_Datatype by_id[] = {MPI_FLOAT,    MPI_DOUBLE,   MPI_UINT8_T,   MPI_INT32_T,  MPI_UINT32_T,
                                MPI_INT64_T,  MPI_UINT64_T, MPI_UINT16_T,  MPI_UINT16_T};
  return by_id[element_type_id<T>];
}

// Byte-wise wrapping sum for MPI_UINT8_T. Open MPI 4.1's AVX reduction
// component (op/avx, picked by default on AVX2/AVX-512 CPUs) adds 8- and 16-bit
// integers with *saturating* instructions (open-mpi/ompi#8045, "wontfix"), so
// MPI_SUM on MPI_UINT8_T gives 200 + 100 = 255 there, while tagc's index
// policies need 200 + 100 = 44 (mod 256, NCCL's behaviour). A user-defined op
// has no such variant. SWAR: eight bytes per 64-bit add, no carry between bytes.
inline void wrapping_sum_u8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  const std::size_t n = std::size_t(*len);
  constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL, high = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    const std::uint64_t r = ((x & low7) + (y & low7)) ^ ((x ^ y) & high);
    std::memcpy(b + i, &r, 8);
  }
  for (; i < n; ++i) b[i] = static_cast<unsigned char>(b[i] + a[i]);
}

// The sum of a 16-bit float type H (bfloat16, float16) over the 16-bit words it travels
// as (MPI-3 has neither a bf16 nor a half type): inout[i] = H(float(in[i]) + float(inout[i])),
// round-to-nearest-even. MPI applies the op once per reduction step, so each hop of a
// ring / butterfly rounds, as NCCL's ncclBfloat16 / ncclFloat16 sums do.
template <class H>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  const std::size_t n = std::size_t(*len);
  for (std::size_t i = 0; i < n; ++i) b[i] = H(float(H::from_bits(a[i])) + float(H::from_bits(b[i]))).bits;
}

}  // namespace detail::mpi

TAGC_END_NAMESPACE
