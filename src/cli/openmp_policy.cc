#include "cli/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "format/artifact_file.h"
#include "onnx/onnx_artifact.h"
#include "vision/pipeline_spec.h"

namespace kiln::cli {
namespace {

bool NamesOnnxFile(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg.size() >= 5 && arg.substr(arg.size() - 5) == ".onnx") return true;
    // An artifact compiled from an ONNX graph (only its table is read).
    if (arg.size() >= 5 && arg.substr(arg.size() - 5) == ".kiln" && IsOnnxArtifact(std::string(arg))) return true;
    // A pipeline of ONNX graphs: a pipeline file kiln run or compile takes, or its artifact.
    if (i == 2 && IsPipelineFilePath(std::string(arg)) &&
        (std::string_view(argv[1]) == "run" || std::string_view(argv[1]) == "compile")) {
      return true;
    }
    if (arg.size() >= 5 && arg.substr(arg.size() - 5) == ".kiln" && ArtifactHasSection(std::string(arg), "pipeline")) {
      return true;
    }
  }
  return false;
}

}  // namespace

void EnsureShortOpenMpSpin(int argc, char** argv) {
  if (!NamesOnnxFile(argc, argv)) return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when exec failed (no /proc): run with libgomp's default.
}

}  // namespace kiln::cli
