// model_config.hpp: the model shape a command line asks for. Apart from trainer.cpp
// so the device trainers (tagc-gpt2-cuda) use it without linking the CPU trainer and
// its host reducer catalogue.
#pragma once

#include "args.hpp"

#include "gpt2/config.hpp"

namespace train {

// The model shape from --model and the overrides; validated (std::invalid_argument).
gpt2::Config model_config(const Args& a);

}  // namespace train
