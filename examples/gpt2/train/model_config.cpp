// model_config.cpp: see model_config.hpp.
// defines: train::model_config
#include "model_config.hpp"

#include <stdexcept>
#include <string>

namespace train {

gpt2::Config model_config(const Args& a) {
  gpt2::Config c = gpt2::parse_config(a.model);
  if (a.L > 0) c.num_layers = a.L;
  if (a.C > 0) c.channels = a.C;
  if (a.NH > 0) c.num_heads = a.NH;
  if (a.maxT > 0) c.max_seq_len = a.maxT;
  c.validate();
  if (a.T > c.max_seq_len)
    throw std::invalid_argument("T (" + std::to_string(a.T) + ") must be <= max_seq_len (" +
                                std::to_string(c.max_seq_len) + ")");
  return c;
}

}  // namespace train
