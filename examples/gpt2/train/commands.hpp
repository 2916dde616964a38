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

// "tagc-gpt2 <command> --help": that command's flags with their defaults (args.cpp);
// empty for an unknown command.
std::string command_usage(const std::string& command, const std::string& program = "tagc-gpt2");
// Whether argv (after the command) asks for help: --help or -h anywhere.
bool wants_help(int argc, const char* const* argv);

}  // namespace train
