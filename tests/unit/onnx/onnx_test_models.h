// The ONNX models the reader's tests read, written by make_onnx_models.py
// into the build tree once per version of the script (only *_test.cc files
// are compiled into test_onnx, so this is all inline).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "testing/test_paths.h"

namespace kiln::testing {

// The folder holding the generated models (made on first use); <folder>/<name>.

inline std::string OnnxTestModelsDir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const std::string script = SourceDir() + "/tests/unit/onnx/make_onnx_models.py";
    std::ifstream in(script);
    std::stringstream text;
    text << in.rdbuf();
    // One folder per version of the script, made under a temporary name and
    // renamed into place, so that test processes running at once share it.
    fs::path final_dir =
        fs::path(BinaryDir()) / "onnx_test_models" / std::to_string(std::hash<std::string>()(text.str()));
    if (fs::exists(final_dir / "done")) return final_dir.string();
    fs::path tmp = final_dir.string() + ".tmp" + std::to_string(::getpid());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    std::string cmd = "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 '" + script + "' '" + tmp.string() + "'";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "failed: " << cmd;
      fs::remove_all(tmp);
      return final_dir.string();
    }
    std::ofstream(tmp / "done") << "ok\n";
    std::error_code ec;
    fs::rename(tmp, final_dir, ec);
    if (ec) fs::remove_all(tmp);  // another process made it first
    return final_dir.string();
  }();
  return dir;
}

inline std::string OnnxTestModel(const std::string& name) {
  return OnnxTestModelsDir() + "/" + name;
}

}  // namespace kiln::testing
