// cmd_tools.cpp: the single-process commands — prepare, eval, sample, tokenize.
// defines: train::cmd_prepare, train::cmd_eval, train::cmd_sample, train::cmd_tokenize
//
// eval and sample compute with the trainers' model, gpt2::DeviceModel, on exec::host
// (the CPU, in both executables: one process, no communicator).
#include "commands.hpp"

// defines: gpt2::Tokenizer
#include "tokenizer.hpp"
// defines: gpt2::prepare, gpt2::list_text_files
#include "prepare.hpp"
// defines: gpt2::DataLoader, gpt2::list_shards
#include "data_loader.hpp"
// defines: gpt2::load_checkpoint
#include "gpt2/checkpoint.hpp"
// defines: gpt2::DeviceModel
#include "gpt2/device_model.hpp"

// defines: tagc::exec::host
#include <tagc/exec/host.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <numeric>
#include <random>
#include <stdexcept>

namespace train {
namespace fs = std::filesystem;

int cmd_prepare(const Args& a) {
  const auto tok = gpt2::Tokenizer::load_dir(a.tokenizer_dir);
  std::vector<fs::path> files;
  if (fs::is_directory(a.corpus)) files = gpt2::list_text_files(a.corpus);
  else files.push_back(a.corpus);
  gpt2::PrepareOptions opt;
  opt.val_fraction = a.val_fraction;
  const auto r = gpt2::prepare(tok, files, a.out_dir, opt);
  std::printf("train: %s (%llu tokens, %zu documents)\nval:   %s (%llu tokens, %zu documents)\n",
              r.train_path.c_str(), (unsigned long long)r.train_tokens, r.train_documents, r.val_path.c_str(),
              (unsigned long long)r.val_tokens, r.val_documents);
  return 0;
}

int cmd_eval(const Args& a) {
  if (a.model_file.empty()) throw std::runtime_error("eval: --model-file is required");
  const gpt2::Checkpoint ck = gpt2::load_checkpoint(a.model_file);
  const std::string data = a.data.empty() ? a.val_data : a.data;
  const int T = std::min(a.T, ck.config.max_seq_len);
  gpt2::DataLoader loader(gpt2::list_shards(data, "val"), size_t(a.B), size_t(T), 0, 1);
  const int batches = int(std::min<uint64_t>(uint64_t(a.val_batches), loader.total_batches()));
  gpt2::DeviceModel<tagc::exec::host> model(ck.config, a.B, T);
  std::vector<int32_t> x(size_t(a.B) * size_t(T)), y(x.size());
  double sum = 0.0;
  for (int i = 0; i < batches; ++i) {
    loader.next_batch(x, y);
    sum += model.forward(ck.params.data(), x.data(), y.data());
  }
  std::printf("eval: %s on %s: loss %.6f over %d batches of %dx%d tokens\n", a.model_file.c_str(), data.c_str(),
              sum / batches, batches, a.B, T);
  return 0;
}

int cmd_sample(const Args& a) {
  if (a.model_file.empty()) throw std::runtime_error("sample: --model-file is required");
  const gpt2::Checkpoint ck = gpt2::load_checkpoint(a.model_file);
  const auto tok = gpt2::Tokenizer::load_dir(a.tokenizer_dir);
  std::vector<uint32_t> ids = tok.encode(a.prompt);
  if (ids.empty()) ids.push_back(tok.eot_token());
  const auto& cfg = ck.config;
  const int T = std::min<int>(cfg.max_seq_len, int(ids.size()) + a.tokens);
  gpt2::DeviceModel<tagc::exec::host> model(cfg, 1, T);
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> x(static_cast<size_t>(T));
  std::vector<float> probs(static_cast<size_t>(cfg.vocab_size));
  std::fputs(a.prompt.c_str(), stdout);
  for (int n = 0; n < a.tokens; ++n) {
    // The last T tokens are the context; causal attention ignores the padding after them.
    const size_t start = ids.size() > size_t(T) ? ids.size() - size_t(T) : 0;
    const size_t len = ids.size() - start;
    std::fill(x.begin(), x.end(), int32_t(tok.eot_token()));
    for (size_t i = 0; i < len; ++i) x[i] = int32_t(ids[start + i]);
    model.forward(ck.params.data(), x.data(), nullptr);
    model.copy_probs(0, int(len - 1), probs.data());
    const float* p = probs.data();
    uint32_t next;
    if (a.top_k <= 1) {
      next = uint32_t(std::max_element(p, p + cfg.vocab_size) - p);
    } else {
      std::vector<uint32_t> order(size_t(cfg.vocab_size));
      std::iota(order.begin(), order.end(), 0u);
      const size_t k = std::min<size_t>(size_t(a.top_k), order.size());
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                        [&](uint32_t l, uint32_t r) { return p[l] > p[r]; });
      std::vector<double> w(k);
      for (size_t i = 0; i < k; ++i) w[i] = p[order[i]];
      next = order[std::discrete_distribution<size_t>(w.begin(), w.end())(rng)];
    }
    ids.push_back(next);
    std::fputs(tok.token_bytes(next).c_str(), stdout);
    std::fflush(stdout);
  }
  std::fputc('\n', stdout);
  return 0;
}

int cmd_tokenize(const Args& a) {
  const auto tok = gpt2::Tokenizer::load_dir(a.tokenizer_dir);
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const auto ids = tok.encode(text);
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %u" : "%u", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace train
