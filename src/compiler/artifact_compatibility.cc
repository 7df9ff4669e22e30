#include "compiler/artifact_compatibility.h"

#include <ctime>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "core/cpu_info.h"
#include "format/artifact_file.h"

namespace kiln {
namespace {

int IsaRank(const std::string& isa) {
  if (isa == "avx512") return 2;
  if (isa == "avx2") return 1;
  if (isa == "scalar") return 0;
  return -1;
}

}  // namespace

nlohmann::json ArtifactProvenance(const std::string& backend, const std::string& isa) {
  nlohmann::json meta;
  const CpuInfo& cpu = GetCpuInfo();
  meta["kiln_version"] = KILN_VERSION;
  meta["format_version"] = kArtifactFormatVersion;
  meta["kernel_layout_version"] = kKernelLayoutVersion;
  meta["backend"] = backend;
  meta["isa"] = isa;
  std::vector<std::string> features;
  for (auto [name, on] : {std::pair{"avx2", cpu.avx2}, {"fma", cpu.fma}, {"f16c", cpu.f16c},
                          {"avx512f", cpu.avx512f}, {"avx512bw", cpu.avx512bw}, {"avx512vl", cpu.avx512vl},
                          {"avx512_vnni", cpu.avx512_vnni}, {"avx512_bf16", cpu.avx512_bf16},
                          {"avx_vnni", cpu.avx_vnni}, {"amx_bf16", cpu.amx_bf16}, {"amx_int8", cpu.amx_int8}}) {
    if (on) features.push_back(name);
  }
  meta["cpu"] = {{"model", cpu.model_name}, {"features", features}};
  meta["created"] = static_cast<int64_t>(std::time(nullptr));
  return meta;
}

Expected<std::string> ArtifactStaleReason(const std::string& path, const nlohmann::json& meta) {
  const int layout = meta.at("kernel_layout_version").get<int>();
  if (layout != kKernelLayoutVersion) {
    return fmt::format("compiled with kernel-layout version {} (kiln {}), this kiln's is {}", layout,
                       meta.value("kiln_version", "?"), kKernelLayoutVersion);
  }
  const std::string isa = meta.at("isa").get<std::string>();
  const std::string here = GetCpuInfo().BestIsa();
  if (IsaRank(isa) < 0) return Corrupt("{}: unknown ISA '{}'", path, isa);
  if (IsaRank(isa) > IsaRank(here)) {
    return fmt::format("compiled for {} ({}), this CPU runs {} kernels", isa,
                       meta.value(nlohmann::json::json_pointer("/cpu/model"), std::string("?")), here);
  }
  return std::string();
}

Status CheckArtifactRuns(const std::string& path, const nlohmann::json& meta, const std::string& rebuild_hint,
                         std::string* note) {
  KILN_ASSIGN_OR_RETURN(std::string stale, ArtifactStaleReason(path, meta));
  if (!stale.empty()) {
    return Unsupported("{}: stale artifact: {}; {} (or load it with --recompile-if-stale)", path, stale,
                       rebuild_hint);
  }
  const std::string isa = meta.at("isa").get<std::string>();
  const std::string here = GetCpuInfo().BestIsa();
  if (IsaRank(isa) < IsaRank(here)) {
    *note = fmt::format("{} was compiled for {}; this CPU runs {} kernels, which read the same layouts", path, isa,
                        here);
  }
  const std::string backend = meta.at("backend").get<std::string>();
  if (BackendRegistry::Get().Find(backend) == nullptr) {
    return Unsupported("{}: compiled for backend '{}', which is not loaded here (available: {}); load its plugin "
                       "(--backend-plugin) or {}",
                       path, backend, BackendRegistry::Get().Names(), rebuild_hint);
  }
  return Status::Ok();
}

}  // namespace kiln
