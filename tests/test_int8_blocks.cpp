// int8_blocks: the parameter gather's int8 block code. Every value within half its
// block's step of the original; ties round away from zero; zeros exact; a non-finite
// value poisons its own block only; W pieces decode in rank order, cut to the length.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <tagc/exec/host.hpp>
#include <tagc/int8_blocks.hpp>

using namespace tagc;

namespace {

std::vector<float> roundtrip(const std::vector<float>& x) {
  std::vector<std::uint8_t> piece(int8_blocks::piece_bytes(x.size()));
  int8_blocks::encode(exec::host{}, x.data(), x.size(), piece.data());
  std::vector<float> y(x.size(), -1.0f);
  int8_blocks::decode(exec::host{}, piece.data(), x.size(), x.size(), y.data());
  return y;
}

// Values whose magnitude changes by orders from block to block, signs mixed.
std::vector<float> spread(std::size_t n, std::uint32_t seed) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const float unit = float(seed >> 8) / float(1u << 24) - 0.5f;
    x[i] = unit * std::pow(10.0f, float(int(i / int8_blocks::block) % 7) - 4.0f);
  }
  return x;
}

}  // namespace

TEST_CASE("int8_blocks: 260 bytes a block of 256 values, the last block padded") {
  CHECK(int8_blocks::piece_bytes(0) == 0);
  CHECK(int8_blocks::piece_bytes(1) == 260);
  CHECK(int8_blocks::piece_bytes(256) == 260);
  CHECK(int8_blocks::piece_bytes(257) == 520);
  CHECK(int8_blocks::piece_bytes(1000) == 4 * 260);
}

TEST_CASE("int8_blocks: every value within half its block's step; each block's largest exact to an ulp") {
  const std::size_t n = 5 * int8_blocks::block + 77;  // a short last block
  const auto x = spread(n, 7);
  const auto y = roundtrip(x);
  for (std::size_t b = 0; b * int8_blocks::block < n; ++b) {
    float amax = 0.0f;
    const std::size_t first = b * int8_blocks::block, last = std::min(n, first + int8_blocks::block);
    for (std::size_t i = first; i < last; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float step = amax / 127.0f;
    for (std::size_t i = first; i < last; ++i) {
      INFO("block " << b << " value " << i << ": " << x[i] << " -> " << y[i]);
      CHECK(std::fabs(y[i] - x[i]) <= 0.5f * step * 1.0001f);
      if (std::fabs(x[i]) == amax) CHECK(std::fabs(y[i] - x[i]) <= amax * 1e-6f);
    }
  }
}

TEST_CASE("int8_blocks: ties round away from zero; a block of zeros decodes to zeros") {
  std::vector<float> x(2 * int8_blocks::block, 0.0f);
  x[0] = 127.0f;  // step 1: codes are the values rounded
  x[1] = 63.5f;
  x[2] = -63.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 0.49f;
  const auto y = roundtrip(x);
  CHECK(y[0] == 127.0f);
  CHECK(y[1] == 64.0f);
  CHECK(y[2] == -64.0f);
  CHECK(y[3] == 1.0f);
  CHECK(y[4] == -1.0f);
  CHECK(y[5] == 0.0f);
  for (std::size_t i = int8_blocks::block; i < x.size(); ++i) CHECK(y[i] == 0.0f);
}

TEST_CASE("int8_blocks: NaN or Inf decodes its whole block to NaN, and only its block") {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto x = spread(3 * int8_blocks::block, 3);
    x[int8_blocks::block + 10] = bad;
    const auto y = roundtrip(x);
    int nan_first = 0, nan_middle = 0, nan_last = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const int b = int(i / int8_blocks::block);
      if (std::isnan(y[i])) (b == 0 ? nan_first : b == 1 ? nan_middle : nan_last)++;
    }
    CHECK(nan_first == 0);
    CHECK(nan_middle == int(int8_blocks::block));
    CHECK(nan_last == 0);
  }
}

TEST_CASE("int8_blocks: W pieces decode in rank order, cut to the length (a gather's padding)") {
  const int W = 3;
  const std::size_t shard = 300, n = 850;  // the last rank's shard holds 250 values and 50 of padding
  const auto whole = spread(W * shard, 11);
  const std::size_t piece = int8_blocks::piece_bytes(shard);
  std::vector<std::uint8_t> pieces(W * piece);
  std::vector<float> want;
  for (int r = 0; r < W; ++r) {
    int8_blocks::encode(exec::host{}, whole.data() + r * shard, shard, pieces.data() + r * piece);
    const auto one = roundtrip(std::vector<float>(whole.begin() + r * shard, whole.begin() + (r + 1) * shard));
    want.insert(want.end(), one.begin(), one.end());
  }
  std::vector<float> out(n + 5, -7.0f);
  int8_blocks::decode(exec::host{}, pieces.data(), shard, n, out.data());
  for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == want[i]);
  for (std::size_t i = n; i < out.size(); ++i) CHECK(out[i] == -7.0f);
}
