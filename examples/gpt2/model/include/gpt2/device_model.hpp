#pragma once
// defines: gpt2::DeviceModel<Exec> — GPT-2 forward/backward on an execution space
// (tagc::exec::host: Thrust-OpenMP + CBLAS, tagc::exec::cuda: a CUDA stream + cuBLAS),
// gpt2::adamw_update / gpt2::sum_of_squares on an execution space.
//
// Single source: the element-wise/row kernels are TAGC_HOST_DEVICE functors launched
// through Thrust with exec.policy(), the matmuls go through a gemm backend per space.
// Same per-unit step sequence, parameter layout (gpt2/layout.hpp) and numerics as
// gpt2::Model<float> (gpt2/model.hpp, whose header comment describes the sequence and
// the += gradient semantics); fp32 master weights and fp32 activations.
#include "gpt2/config.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/optim.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace gpt2 {

template <class Exec>
class DeviceModel {
 public:
  // Validates cfg (std::invalid_argument); requires B >= 1 and 1 <= T <= max_seq_len.
  // Allocates every activation buffer in Exec memory once; no step allocates.
  DeviceModel(const Config& cfg, int B, int T, Exec exec = {});
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const Config& config() const;
  int batch() const;
  int seq_len() const;
  int num_units() const;
  const std::vector<UnitInfo>& unit_infos() const;
  const Exec& exec() const;

  // Every pointer is memory of Exec (device memory for exec::cuda); inputs/targets are
  // int32 token ids [B,T] in Exec memory. Semantics exactly as gpt2::Model<float>:
  // steps in order (std::logic_error otherwise), token ids in [0, V) (std::out_of_range),
  // gradients accumulate (+=).
  // Work is enqueued on exec (its stream); the host waits for it in three places only:
  // forward_unit(0) and forward_head each check their token ids on the space and fetch
  // the answer, and forward_head returns the loss. Everything else returns at once, so a
  // caller synchronizes exec before reading gradients from another stream or the host.
  void forward_unit(int u, const float* unit_params, const int* inputs = nullptr);
  float forward_head(const float* embed_params, const int* targets);  // waits for Exec to return the mean loss
  void backward_head(const float* embed_params, float* embed_grads, float loss_scale = 1.0f);
  void backward_unit(int u, const float* unit_params, float* unit_grads);
  float forward(const float* params, const int* inputs, const int* targets);
  void backward(const float* params, float* grads, float loss_scale = 1.0f);

  // The softmax of the last forward_head (with or without targets), [B,T,Vp] in Exec
  // memory, row b*T + t = the next-token distribution after position t of sequence b;
  // columns >= V are unspecified. Valid until backward_head, which turns it into dlogits
  // in place: outside that window std::logic_error (what `sample` reads; as
  // gpt2::Model<float>::probs()).
  const float* probs() const;
  // Row (b, t) of probs(), its V probabilities copied into host memory out[0, V) (waits
  // for Exec); std::out_of_range for b, t outside [0, B) x [0, T).
  void copy_probs(int b, int t, float* out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Optimizer pieces on Exec memory, same math as gpt2/optim.hpp (enqueued on exec).
template <class Exec>
void adamw_update(const Exec& exec, float* params, const float* grads, float* m, float* v,
                  std::size_t n, const AdamW& opt, int t);
template <class Exec>
double sum_of_squares(const Exec& exec, const float* x, std::size_t n);  // waits for Exec

// Explicit instantiations: tagc::exec::host and tagc::exec::host_portable (the GPU's
// launch shapes on the CPU, for tests) in src/device_model_host.cpp (always built),
// tagc::exec::cuda in src/device_model_cuda.cu (built only when CUDA is enabled).
}  // namespace gpt2
