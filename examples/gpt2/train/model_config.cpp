// model_config.cpp: see model_config.hpp.
// defines: train::model_config, train::with_init_shape, train::shape_text
#include "model_config.hpp"

// defines: gpt2::load_checkpoint_config
#include "gpt2/checkpoint.hpp"

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

std::string shape_text(const gpt2::Config& c) {
  return "L=" + std::to_string(c.num_layers) + " C=" + std::to_string(c.channels) + " NH=" +
         std::to_string(c.num_heads) + " maxT=" + std::to_string(c.max_seq_len) + " V=" + std::to_string(c.vocab_size);
}

Args with_init_shape(const Args& a) {
  if (a.init_from.empty()) return a;  // (with --resume too: the run it continues had this shape)
  const gpt2::Config ck = gpt2::load_checkpoint_config(a.init_from);
  if (a.shape_given) {
    const gpt2::Config asked = model_config(a);
    if (!(asked == ck))
      throw std::invalid_argument("--init-from " + a.init_from + " holds a model of " + shape_text(ck) +
                                  ", the command line asks for " + shape_text(asked) +
                                  " (--model " + a.model + " and overrides): leave out --model/--L/--C/--NH/--maxT "
                                  "to take the checkpoint's shape");
    return a;
  }
  Args r = a;
  r.L = ck.num_layers;
  r.C = ck.channels;
  r.NH = ck.num_heads;
  r.maxT = ck.max_seq_len;
  if (!(model_config(r) == ck))  // the vocabulary is not a flag: our presets have GPT-2's
    throw std::invalid_argument("--init-from " + a.init_from + " holds a model of " + shape_text(ck) +
                                ", this trainer builds V=" + std::to_string(model_config(r).vocab_size));
  return r;
}

}  // namespace train
