// The ONNX models the C API's ONNX tests run, written by
// make_capi_onnx_models.py into the build tree once per version of the
// script (shared by test processes running at once).
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

namespace kiln::capi_test {

inline std::string CapiOnnxModelsDir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const std::string script = testing::SourceDir() + "/tests/unit/capi/make_capi_onnx_models.py";
    std::ifstream in(script);
    std::stringstream text;
    text << in.rdbuf();
    fs::path final_dir = fs::path(testing::BinaryDir()) / "capi_onnx_models" /
                         std::to_string(std::hash<std::string>()(text.str()));
    if (fs::exists(final_dir / "done")) return final_dir.string();
    // Made under a temporary name and renamed into place.
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

inline std::string CapiOnnxModel(const std::string& name) {
  return CapiOnnxModelsDir() + "/" + name;
}

}  // namespace kiln::capi_test
