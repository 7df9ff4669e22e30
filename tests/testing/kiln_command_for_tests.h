// Runs the `kiln` executable of this build as the command-line tests do:
// arguments quoted for the shell, stdout and stderr captured in files of a
// fresh folder under the build tree.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_paths.h"

namespace kiln::testing {

// A file's bytes; "" when it cannot be read.
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `s` in single quotes for the shell.
inline std::string ShellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct KilnRun {
  int exit_code = -1;
  std::string out, err;
};

// `[ENV] kiln ARGS`, waited for. `env` is prepended as written ("KILN_ISA=avx2").
inline KilnRun RunKiln(const std::vector<std::string>& args, const std::string& env = "") {
  static int runs = 0;
  const std::string dir =
      BinaryDir() + "/test_tmp/kiln_run." + std::to_string(::getpid()) + "." + std::to_string(runs++);
  std::filesystem::create_directories(dir);
  std::string cmd = env + " " + ShellQuoted(KilnBinary());
  for (const std::string& a : args) cmd += " " + ShellQuoted(a);
  cmd += " >" + ShellQuoted(dir + "/out") + " 2>" + ShellQuoted(dir + "/err");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFileBytes(dir + "/out"),
          ReadFileBytes(dir + "/err")};
}

}  // namespace kiln::testing
