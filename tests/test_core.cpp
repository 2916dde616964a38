// Core pieces: MurmurHash3, layout, the exact radix-select threshold.
#include <doctest/doctest.h>

#include <cstring>

#include "support/harness.hpp"

namespace {
// MurmurHash3_x86_32 over bytes, written from the algorithm's definition.
std::uint32_t murmur_bytes(const std::uint8_t* data, int len, std::uint32_t seed) {
  const auto rotl = [](std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  std::uint32_t h = seed;
  const int blocks = len / 4;
  for (int i = 0; i < blocks; ++i) {
    std::uint32_t k;
    std::memcpy(&k, data + 4 * i, 4);
    k *= 0xcc9e2d51u; k = rotl(k, 15); k *= 0x1b873593u;
    h ^= k; h = rotl(h, 13); h = h * 5 + 0xe6546b64u;
  }
  std::uint32_t k = 0;
  const std::uint8_t* tail = data + 4 * blocks;
  switch (len & 3) {
    case 3: k ^= std::uint32_t(tail[2]) << 16; [[fallthrough]];
    case 2: k ^= std::uint32_t(tail[1]) << 8; [[fallthrough]];
    case 1: k ^= tail[0]; k *= 0xcc9e2d51u; k = rotl(k, 15); k *= 0x1b873593u; h ^= k;
  }
  h ^= std::uint32_t(len);
  h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
  return h;
}
}  // namespace

TEST_CASE("murmur3_32 of a 4-byte key matches MurmurHash3_x86_32") {
  // Published vectors: empty input with seed 0 is 0; {0,0,0,0} with seed 0 is 0x2362F9DE.
  CHECK(murmur_bytes(nullptr, 0, 0) == 0u);
  CHECK(tagc::murmur3_32(0u, 0u) == 0x2362F9DEu);
  for (std::uint32_t key : {0u, 1u, 2u, 1023u, 65537u, 0xdeadbeefu})
    for (std::uint32_t seed : {0u, 1u, 2u, 3u}) {
      std::uint8_t bytes[4];
      std::memcpy(bytes, &key, 4);  // little-endian, as the reference hashes the block number
      CHECK(tagc::murmur3_32(key, seed) == murmur_bytes(bytes, 4, seed));
    }
}

TEST_CASE("layout pads explicitly and never sketches larger than the shard") {
  for (std::size_t n : {0ul, 1ul, 7ul, 1000ul, 1023ul, 1024ul, 1025ul, 4097ul, 100003ul, 1ul << 20})
    for (int shards : {1, 2, 3, 8})
      for (int ratio : {2, 4, 10}) {
        const auto l = tagc::make_layout(n, shards, 1024, ratio, 4);
        CAPTURE(n); CAPTURE(shards); CAPTURE(ratio);
        CHECK(l.padded() >= n);
        CHECK(l.padded() - n < std::size_t(shards));
        CHECK(l.cells <= l.shard_size);
        if (!l.dense) {
          CHECK(l.cells == 3 * l.part_rows * l.lanes);
          CHECK(l.blocks * l.lanes >= l.shard_size);
        }
        CHECK(l.index_bytes * 8 >= l.shard_size * 4);
      }
  const auto big = tagc::make_layout(1u << 24, 4, 1024, 10, 1);
  CHECK_FALSE(big.dense);
  CHECK(double(big.cells) == doctest::Approx(double(big.shard_size) / 10).epsilon(0.01));
}

TEST_CASE("sketch cells of one element are distinct and inside the sketch") {
  const auto l = tagc::make_layout(1u << 20, 2, 1024, 10, 4);
  for (std::size_t e = 0; e < l.shard_size; e += 997) {
    const auto c0 = tagc::detail::sketch_cell(l, e, 0), c1 = tagc::detail::sketch_cell(l, e, 1),
               c2 = tagc::detail::sketch_cell(l, e, 2);
    CHECK(c0 < l.cells); CHECK(c1 < l.cells); CHECK(c2 < l.cells);
    CHECK(c0 != c1); CHECK(c1 != c2); CHECK(c0 != c2);
  }
}

TEST_CASE("threshold meets the target sparsity exactly (radix select == sort)") {
  // Packed values: exact at any load, so the residual shows the threshold alone.
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::PackedPolicy, tagc::DecodePolicy<>>;
  for (std::size_t n : {1ul, 5ul, 1000ul, 65536ul, 300001ul})
    for (double theta : {0.0, 0.5, 0.8, 0.9, 0.9875, 1.0}) {
      CAPTURE(n); CAPTURE(theta);
      const auto g = tagc_test::gradient(n, 11, 0, 0, 0.7);  // 30% exact zeros, ties among them
      R r;
      REQUIRE(r.initialize({.length = n, .world_size = 1, .rank = 0, .sparsity = theta}).ok());
      std::vector<float> out(r.output_size());
      tagc::reduce_stats st;
      tagc_test::on_ranks(1, [&](auto& comm) {
        REQUIRE(r.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &st).ok());
      });
      const auto keep = tagc_test::reference_keep(g, theta);
      const auto kept_ref = std::size_t(std::count(keep.begin(), keep.end(), true));
      CHECK(st.kept == kept_ref);
      CHECK(double(st.kept) <= std::floor((1.0 - theta) * double(n)) + 1e-9);  // never undershoots theta
      CHECK(st.sparsity >= theta - 1e-12);
      // With distinct magnitudes the target is met exactly (not just bounded).
      std::size_t nonzero = 0;
      for (float x : g) nonzero += x != 0.0f;
      const auto k = std::size_t(std::floor((1.0 - theta) * double(n)));
      if (k <= nonzero) CHECK(st.kept == k);
      // Residual is exactly what was not kept.
      const auto res = r.residual_to_host();
      for (std::size_t i = 0; i < n; ++i) REQUIRE(res[i] == (keep[i] ? 0.0f : g[i]));
    }
}

TEST_CASE("cost model: compression pays on slow links for large units, not for small ones or fast links") {
  const tagc::codec_model codec{.compress_bytes_per_second = 0.5e9, .decode_bytes_per_second = 1e9};
  const tagc::link_model slow{.bytes_per_second = 12.5e6, .latency_seconds = 200e-6};  // 100 Mbit/s
  const tagc::link_model fast{.bytes_per_second = 12.5e9, .latency_seconds = 5e-6};    // 100 Gbit/s
  const double bits = 5.2;  // 10x sketch + 1-bit index, the paper's accounting
  const auto big_slow = tagc::estimate_reduce_scatter(1u << 24, 2, bits, slow, codec);
  CHECK(big_slow.pays());
  CHECK(big_slow.speedup() > 3.0);
  // Hand check of the formula: dense = a + (1/2) 4n/B.
  CHECK(big_slow.dense_seconds == doctest::Approx(200e-6 + 0.5 * 4.0 * double(1u << 24) / 12.5e6));
  CHECK_FALSE(tagc::estimate_reduce_scatter(1u << 24, 2, bits, fast, codec).pays());  // the codec is the bottleneck
  CHECK_FALSE(tagc::estimate_reduce_scatter(256, 2, bits, slow, codec).pays());       // latency of 4 collectives
}

TEST_CASE("cost model, two levels: one rank per node is the flat model; what crosses nodes does not grow with K") {
  const tagc::codec_model codec{.compress_bytes_per_second = 0.5e9, .decode_bytes_per_second = 1e9};
  const tagc::link_model node{.bytes_per_second = 450e9, .latency_seconds = 10e-6};
  const tagc::link_model link{.bytes_per_second = 1.25e9, .latency_seconds = 50e-6};  // 10 Gbit/s per node
  const std::size_t n = 1u << 24;
  const auto flat = tagc::estimate_reduce_scatter(n, 8, 2.0, link, codec);
  const auto one = tagc::estimate_two_level_reduce_scatter(n, 8, 1, 32.0, 2.0, node, link, codec);
  CHECK(one.dense_seconds == doctest::Approx(flat.dense_seconds));
  CHECK(one.compressed_seconds == doctest::Approx(flat.compressed_seconds));
  // 8 nodes x 8: the node stage (bf16 over NVLink) plus 7/8 of the buffer through the node link
  const auto two = tagc::estimate_two_level_reduce_scatter(n, 8, 8, 16.0, 1.0, node, link, codec);
  const double node_s = 10e-6 + 7.0 / 8.0 * double(n) * 2.0 / 450e9;
  CHECK(two.dense_seconds == doctest::Approx(node_s + 50e-6 + 7.0 / 8.0 * double(n) * 2.0 / 1.25e9));
  CHECK(two.pays());
  // 16 ranks per node instead of 8: the same bytes cross the node link
  const auto more = tagc::estimate_two_level_reduce_scatter(n, 8, 16, 16.0, 1.0, node, link, codec);
  CHECK(more.dense_seconds - more.compressed_seconds > 0.9 * (two.dense_seconds - two.compressed_seconds));
}

TEST_CASE("cost model, hybrid sharding: the plain all-reduce moves twice a reduce-scatter's bytes across nodes") {
  const tagc::codec_model codec{.compress_bytes_per_second = 100e9, .decode_bytes_per_second = 100e9};
  const tagc::link_model node{.bytes_per_second = 450e9, .latency_seconds = 10e-6};
  const tagc::link_model link{.bytes_per_second = 3.125e9, .latency_seconds = 50e-6};  // 25 Gbit/s per node
  const std::size_t n = 1u << 26;
  const auto rs = tagc::estimate_two_level_reduce_scatter(n, 16, 8, 16.0, 1.0, node, link, codec);
  const auto ar = tagc::estimate_two_level_all_reduce(n, 16, 8, 16.0, 1.0, node, link, codec);
  const double node_s = 10e-6 + 7.0 / 8.0 * double(n) * 2.0 / 450e9;
  CHECK(ar.dense_seconds == doctest::Approx(node_s + 50e-6 + 2.0 * 15.0 / 16.0 * double(n) * 2.0 / 3.125e9));
  CHECK(ar.dense_seconds - node_s == doctest::Approx(2.0 * (rs.dense_seconds - node_s) - 50e-6));
  // the compressed side differs by decoding the whole slice instead of one shard, and the
  // reduce-scatter's interleaved lanes regather the node's region (n/M floats) inside the node
  const double regather = 10e-6 + 7.0 / 8.0 * 4.0 * double(n) / 16.0 / 450e9;
  CHECK(ar.compressed_seconds - rs.compressed_seconds ==
        doctest::Approx(4.0 * (double(n) / 8.0 - double(n) / 128.0) / 100e9 - regather));
  CHECK(ar.speedup() > rs.speedup());
  // a single node has nothing to exchange across nodes
  CHECK(tagc::estimate_two_level_all_reduce(n, 1, 8, 16.0, 1.0, node, link, codec).dense_seconds ==
        doctest::Approx(node_s));
}

TEST_CASE("cost model: a shared selection's bits: values all-reduced, positions as a list or a bitmap, the smaller") {
  CHECK(tagc::shared_selection_cross_bits(0.0125) == doctest::Approx(0.4 + 0.4));  // a list of 32-bit positions
  CHECK(tagc::shared_selection_cross_bits(0.05) == doctest::Approx(1.6 + 1.0));    // a bitmap
  CHECK(tagc::shared_selection_cross_bits(0.05, 32.0) == doctest::Approx(3.2 + 1.0));
  CHECK(tagc::routed_index_cross_bits(0.0125) == doctest::Approx(0.6));       // 48-bit entries
  CHECK(tagc::routed_index_cross_bits(0.0125, 32.0) == doctest::Approx(0.8));
  CHECK(tagc::routed_index_cross_bits(0.5) == doctest::Approx(16.0));          // the buffer instead
}
