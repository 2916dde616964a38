// model_config.hpp: the model shape a command line asks for. Apart from the trainer so
// the commands that only read a model (eval, sample) use it without the trainer and its
// reducer catalogue.
#pragma once

#include "args.hpp"

#include "gpt2/config.hpp"

#include <string>

namespace train {

// The model shape from --model and the overrides; validated (std::invalid_argument).
gpt2::Config model_config(const Args& a);

// --init-from takes the model shape from the checkpoint's header (with --resume too: the
// run it continues started from that file): `a` with L, C, NH and maxT set to the
// checkpoint's. A shape given on the command line (--model, --L, --C, --NH, --maxT) that
// differs from it is refused (std::invalid_argument naming both shapes); one that matches
// is kept. Without --init-from: `a` unchanged. Errors reading the header:
// std::runtime_error naming the file.
Args with_init_shape(const Args& a);
// "L=2 C=64 NH=2 maxT=64 V=50257": a shape in the words of the flags.
std::string shape_text(const gpt2::Config& c);

}  // namespace train
