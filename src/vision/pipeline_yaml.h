// A pipeline file written in YAML (.yaml, .yml): the same schema as the
// JSON one, read into the same JSON tree, so that one check (ParsePipeline)
// serves both. Plain scalars are typed as YAML 1.2's core schema types them
// (null, true/false, integers, floats; anything else a string), quoted ones
// are strings; !!str, !!int, !!float, !!bool and !!null tags are honored.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

// `text`: the file's contents; `file` names it in messages, which give the
// line and column (1-based) and the key at fault. Syntax errors, aliases to
// undefined anchors, keys given twice or that are not plain text, numbers
// out of range, more than one document and nesting past 64 levels are
// errors.
// `lines`, when given, gets the line (1-based) of every node by its path:
// "stages", "stages[2]", "stages[2].width".
Expected<nlohmann::json> PipelineYamlToJson(std::string_view text, const std::string& file,
                                            std::map<std::string, int>* lines = nullptr);

// `error`, a schema error (ParsePipeline's) about the YAML file read into
// `json`, with the line of the stage and key it names in front, where it
// names one: "pipeline FILE:LINE: stage 'x': ..." (else "pipeline FILE").
Status WithYamlLine(const Status& error, const nlohmann::json& json, const std::map<std::string, int>& lines,
                    const std::string& file);

// Whether `path` names a YAML file (.yaml or .yml).
bool IsYamlPath(const std::string& path);

}  // namespace kiln
