// commands.hpp: the subcommands of tagc-gpt2, each a function from parsed Args to an
// exit code. They throw on errors; main() prints the message.
#pragma once

#include "args.hpp"

namespace train {

int cmd_train(const Args& a);     // needs MPI initialised (main does it for "train")
int cmd_prepare(const Args& a);
int cmd_eval(const Args& a);
int cmd_sample(const Args& a);
int cmd_tokenize(const Args& a);

}  // namespace train
